#include "egress_proxy/log_proposal.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <set>

#include <fmt/format.h>

#include "agentctl/policy.hpp"

namespace agentctl::egress_proxy {
namespace {

// The refusals an allow rule opens; the others (loopback, LAN, the host's own
// addresses, ...) stay refused whatever the allowlist says.
bool allow_rule_opens(const std::string& reason) {
    return reason == policy::to_string(policy::Reason::NotAllowlisted) ||
           reason == policy::to_string(policy::Reason::PortNotAllowed) ||
           reason == policy::to_string(policy::Reason::BareIpNotListed);
}

std::string human_bytes(std::uint64_t bytes) {
    if (bytes < 1024) return fmt::format("{} B", bytes);
    constexpr const char* k_units[] = {"KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes) / 1024.0;
    std::size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < std::size(k_units)) {
        value /= 1024.0;
        ++unit;
    }
    return fmt::format("{:.1f} {}", value, k_units[unit]);
}

// One proposed entry and what the log says of it.
struct Entry {
    std::string host;  // a name, `*.parent`, or an address
    std::uint16_t port = 0;
    std::vector<std::string> notes;  // comment lines, without the `# `
};

std::string reasons_text(const std::map<std::string, std::uint64_t>& reasons) {
    std::string out;
    for (const auto& [reason, count] : reasons) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", reason, count);
    return out;
}

std::string usage_note(const DestinationSummary& row) {
    std::string note;
    if (row.connections > 0) {
        note = fmt::format("used: {} connection{}, {} up, {} down", row.connections, row.connections == 1 ? "" : "s",
                           human_bytes(row.bytes_up), human_bytes(row.bytes_down));
    }
    if (row.refusals > 0) {
        note += fmt::format("{}refused {} time{} ({})", note.empty() ? "" : "; ", row.refusals,
                            row.refusals == 1 ? "" : "s", reasons_text(row.refusal_reasons));
    }
    return note + fmt::format("; seen {} to {}", row.first_seen, row.last_seen);
}

// A name from the log as a comment may hold it: what a sandbox asked for can
// be anything, and must never start a line of its own in the proposal.
std::string printable(std::string_view text) {
    std::string out;
    for (char c : text) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                           c == '-' || c == '_' || c == ':' || c == '[' || c == ']' || c == '*';
        out += plain ? c : '?';
    }
    return out;
}

Entry entry_of(const DestinationSummary& row) {
    Entry entry{row.host, row.port, {policy::destination_text(row.host, row.port) + " " + usage_note(row)}};
    if (policy::parse_ip_literal(row.host)) {
        entry.notes.push_back("CHECK: an address, not a name: whoever holds it later is let in too");
    } else if (looks_generated(row.host)) {
        entry.notes.push_back("CHECK: a random-looking name: a per-session host, or data carried in the name");
    }
    return entry;
}

std::string parent_of(const std::string& host) {
    const auto dot = host.find('.');
    return dot == std::string::npos ? std::string() : host.substr(dot + 1);
}

// Two or more names under one parent (of at least two labels) on one port
// become one `*.parent` entry; its notes keep each name's.
std::vector<Entry> group_wildcards(std::vector<Entry> entries) {
    std::map<std::pair<std::string, std::uint16_t>, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (policy::parse_ip_literal(entries[i].host)) continue;
        const auto parent = parent_of(entries[i].host);
        if (parent.find('.') == std::string::npos) continue;  // never *.com
        groups[{parent, entries[i].port}].push_back(i);
    }
    std::vector<Entry> out;
    std::set<std::size_t> grouped;
    for (const auto& [key, members] : groups) {
        if (members.size() < 2) continue;
        Entry wildcard{"*." + key.first, key.second, {}};
        for (auto i : members) {
            wildcard.notes.insert(wildcard.notes.end(), entries[i].notes.begin(), entries[i].notes.end());
            grouped.insert(i);
        }
        out.push_back(std::move(wildcard));
    }
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (!grouped.contains(i)) out.push_back(std::move(entries[i]));
    }
    return out;
}

}  // namespace

bool looks_generated(std::string_view host) {
    if (policy::parse_ip_literal(host)) return false;
    std::size_t start = 0;
    while (start <= host.size()) {
        auto end = host.find('.', start);
        if (end == std::string_view::npos) end = host.size();
        const auto label = host.substr(start, end - start);
        start = end + 1;
        if (label.size() < 12) continue;
        std::map<char, int> counts;
        int digits = 0;
        for (char c : label) {
            ++counts[c];
            digits += (c >= '0' && c <= '9') ? 1 : 0;
        }
        double entropy = 0;
        for (const auto& [c, n] : counts) {
            const double p = static_cast<double>(n) / static_cast<double>(label.size());
            entropy -= p * std::log2(p);
        }
        // English-like labels stay under ~3.5 bits a character; random
        // base32/hex strings of this length reach 3.5 and above, with digits mixed in.
        if (entropy >= 3.5 && digits > 0) return true;
    }
    return false;
}

void print_proposal(const std::vector<DestinationSummary>& rows, const ProposalOptions& options, std::ostream& out) {
    std::vector<Entry> entries;
    std::vector<std::string> left_out;
    std::uint64_t anonymous_refusals = 0;
    for (const auto& row : rows) {
        if (row.host.empty()) {
            anonymous_refusals += row.refusals;
            continue;
        }
        bool wanted = row.connections > 0;
        std::map<std::string, std::uint64_t> closed_reasons;
        for (const auto& [reason, count] : row.refusal_reasons) {
            if (allow_rule_opens(reason)) {
                wanted = true;
            } else {
                closed_reasons[reason] = count;
            }
        }
        const auto destination = policy::destination_text(row.host, row.port);
        bool valid = true;
        try {
            (void)policy::parse_allow_entry(destination, {});
        } catch (const std::exception&) {
            valid = false;
        }
        if (wanted && valid) {
            entries.push_back(entry_of(row));
        } else if (wanted) {
            left_out.push_back(printable(destination) + ": not a host name or address an allow rule can name");
        } else if (!closed_reasons.empty()) {
            left_out.push_back(fmt::format("{} refused ({}): an allow rule does not open it", printable(destination),
                                           reasons_text(closed_reasons)));
        }
    }
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return std::tie(a.host, a.port) < std::tie(b.host, b.port); });
    if (options.wildcards) entries = group_wildcards(std::move(entries));

    const bool profile = options.form == ProposalForm::Profile;
    const std::string indent = profile ? "      " : "";
    out << fmt::format(
        "# Proposed by `agentctl policy propose {}` from its network log: what it used and what\n"
        "# it was refused that an allow rule opens. Read every CHECK before you use it.\n",
        options.sandbox);
    for (const auto& line : left_out) out << "# not proposed: " << line << "\n";
    if (anonymous_refusals > 0) {
        out << fmt::format("# not proposed: {} refusals summarised without their destination (a flood)\n",
                           anonymous_refusals);
    }
    if (profile) {
        out << "apiVersion: agentctl.dev/v1\nkind: Profile\nmetadata:\n"
            << fmt::format("  name: {}-proposed\n", options.sandbox)
            << fmt::format("  description: \"what {} used and was refused, from its network log\"\n", options.sandbox)
            << "spec:\n  network:\n    denyLAN: true\n";
        out << (entries.empty() ? "    allow: []\n" : "    allow:\n");
    }
    for (const auto& entry : entries) {
        for (const auto& note : entry.notes) out << indent << "# " << note << "\n";
        if (profile) {
            out << fmt::format("{}- domain: \"{}\"\n{}  ports: [{}]\n", indent, entry.host, indent, entry.port);
        } else {
            out << policy::destination_text(entry.host, entry.port) << "\n";
        }
    }
    if (entries.empty() && !profile) out << "# (nothing to propose: the log holds no connection and no refusal)\n";
    out.flush();
}

}  // namespace agentctl::egress_proxy
