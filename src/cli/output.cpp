#include "cli/output.hpp"

#include <algorithm>
#include <chrono>
#include <ostream>

#include <fmt/format.h>

#include "core/utc_time.hpp"

namespace agentctl::cli {

std::string join(const std::vector<std::string>& items, std::string_view separator) {
    std::string text;
    for (const auto& item : items) {
        if (!text.empty()) text += separator;
        text += item;
    }
    return text;
}

void print_table(std::ostream& out, const std::vector<std::string>& headers,
                 const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> widths(headers.size());
    for (std::size_t i = 0; i < headers.size(); ++i) widths[i] = headers[i].size();
    for (const auto& row : rows) {
        for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i)
            widths[i] = std::max(widths[i], row[i].size());
    }
    auto print_row = [&](const std::vector<std::string>& row) {
        std::string line;
        for (std::size_t i = 0; i < widths.size(); ++i) {
            const std::string& cell = i < row.size() ? row[i] : std::string();
            line += i + 1 < widths.size() ? fmt::format("{:<{}}  ", cell, widths[i]) : cell;
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out << line << "\n";
    };
    print_row(headers);
    for (const auto& row : rows) print_row(row);
}

void print_fields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields) {
    std::size_t width = 0;
    for (const auto& [key, value] : fields) width = std::max(width, key.size() + 1);
    for (const auto& [key, value] : fields) out << fmt::format("{:<{}} {}\n", key + ":", width, value);
}

std::vector<std::string> mount_lines(const std::vector<Mount>& mounts) {
    std::vector<std::string> lines;
    for (const auto& m : mounts) {
        lines.push_back(
            fmt::format("  {} -> {} ({})", m.host_path, m.guest_path, m.writable ? "writable" : "read-only"));
    }
    return lines;
}

namespace {

nlohmann::json text_or_null(const std::string& text) { return text.empty() ? nlohmann::json() : nlohmann::json(text); }

nlohmann::json process_json(const HostProcess& p) {
    return {{"listen", p.listen},
            {"running", p.running},
            {"pid", p.pid > 0 ? nlohmann::json(p.pid) : nlohmann::json()},
            {"user", text_or_null(p.user)},
            {"where", p.where},
            {"scope", text_or_null(p.scope)},
            {"log", text_or_null(p.log)},
            {"problem", text_or_null(p.problem)}};
}

// The line and what it rests on: `verified` is true only when the line says
// "verified" (checked at status time).
nlohmann::json confinement_json(const InstanceInfo& info) {
    nlohmann::json probes = nlohmann::json::array();
    for (const auto& p : info.evidence.probes) {
        probes.push_back(
            {{"name", p.name}, {"verdict", p.verdict}, {"held", p.verdict == "held"}, {"detail", p.detail}});
    }
    const auto& c = info.confinement;
    return {{"text", to_string(c)},
            {"state", text_or_null(to_string(ConfinementStatus{c.state, {}}))},
            {"verified", c.state == ConfinementState::Verified},
            {"checkedAt", text_or_null(info.evidence.checked_at)},
            {"source", text_or_null(info.evidence.source)},
            {"probes", probes},
            {"missing", info.evidence.missing}};
}

}  // namespace

nlohmann::json instance_json(const InstanceInfo& info) {
    nlohmann::json mounts = nlohmann::json::array();
    for (const auto& m : info.mounts) {
        mounts.push_back({{"host_path", m.host_path}, {"guest_path", m.guest_path}, {"writable", m.writable}});
    }
    nlohmann::json ports = nlohmann::json::array();
    for (const auto& p : info.ports) {
        ports.push_back({{"listen_address", p.listen_address},
                         {"host_port", p.host_port},
                         {"guest_port", p.guest_port},
                         {"protocol", p.protocol},
                         {"loopback_only", is_loopback_address(p.listen_address)}});
    }
    nlohmann::json j = {{"name", info.name},
                        {"provider", info.provider},
                        {"status", info.status},
                        {"image", info.image},
                        {"profiles", info.profiles},
                        {"created_at", info.created_at},
                        {"ips", info.ips},
                        {"mounts", mounts},
                        {"ports", ports},
                        {"isolation", info.isolation},
                        {"user", info.user},
                        {"confinement", confinement_json(info)},
                        {"widenings", info.widenings}};
    j["egressProxy"] = info.egress_proxy ? process_json(*info.egress_proxy) : nlohmann::json();
    j["resolver"] = info.resolver ? process_json(*info.resolver) : nlohmann::json();
    // Only a clustered backend places sandboxes: null elsewhere.
    j["location"] = info.location.empty() ? nlohmann::json() : nlohmann::json(info.location);
    if (info.network) {
        nlohmann::json allow = nlohmann::json::array();
        for (const auto& rule : info.network->allow) {
            allow.push_back(
                {{"entry", rule.entry()},
                 {"origin", rule.origin},
                 {"expiresAt", rule.expires != 0 ? nlohmann::json(utc_time(rule.expires)) : nlohmann::json()}});
        }
        nlohmann::json budgets = nlohmann::json::array();
        for (const auto& budget : info.network->budgets) {
            budgets.push_back(
                {{"destination", policy::destination_text(budget.host, budget.port)}, {"bytes", budget.bytes}});
        }
        j["network"] = {
            {"enabled", info.network->enabled},
            {"denyLAN", info.network->deny_lan},
            {"allowLAN", info.network->allow_lan},
            {"allow", allow},
            {"budgets", budgets},
            {"defaultBudget",
             info.network->default_budget != 0 ? nlohmann::json(info.network->default_budget) : nlohmann::json()},
            {"dns",
             {{"servers", info.network->dns.servers},
              {"disabled", info.network->dns.disabled},
              {"allowlistedOnly", info.dns_allowlisted_only}}}};
    }
    for (const auto& [key, value] : info.extra) j["extra"][key] = value;
    return j;
}

void print_instance_status(std::ostream& out, const InstanceInfo& info) {
    std::vector<std::pair<std::string, std::string>> fields = {
        {"Name", info.name},
        {"Provider", info.provider},
        {"Status", info.status},
        {"Image", info.image},
        {"Isolation", info.isolation},
        {"User", info.user},
        {"Profiles", join(info.profiles, ", ")},
        {"IPs", info.ips.empty() ? "-" : join(info.ips, ", ")},
        {"Created", info.created_at},
    };
    // Right after Status: where it runs, in a cluster.
    if (!info.location.empty()) fields.insert(fields.begin() + 3, {"Location", info.location + " (cluster member)"});
    if (!info.confinement.empty()) fields.emplace_back("Confinement", to_string(info.confinement));
    for (const auto& [key, value] : info.extra) fields.emplace_back(key, value);
    print_fields(out, fields);

    if (info.mounts.empty()) {
        out << "Mounts:      none (no host directories are exposed to this sandbox)\n";
    } else {
        out << "Mounts:\n";
        for (const auto& line : mount_lines(info.mounts)) out << line << "\n";
    }
    if (info.ports.empty()) {
        out << "Ports:       none published\n";
    } else {
        out << "Ports:\n";
        for (const auto& p : info.ports) {
            const bool v6 = p.listen_address.find(':') != std::string::npos;
            out << fmt::format(
                "  {}:{} -> {}/{}{}\n", v6 ? "[" + p.listen_address + "]" : p.listen_address, p.host_port, p.guest_port,
                p.protocol,
                is_loopback_address(p.listen_address) ? " (this machine only)" : " (REACHABLE FROM OTHER MACHINES)");
        }
    }
    if (info.network) {
        const auto& net = *info.network;
        if (!net.enabled) {
            out << "Network:     no policy: egress is unrestricted\n";
        } else {
            out << fmt::format(
                "Network:     default deny; LAN {}; DNS {}\n", net.allow_lan ? "OPEN (--allow-lan)" : "blocked",
                net.dns.disabled ? "disabled"
                : info.dns_allowlisted_only
                    ? "for allowlisted names only" +
                          (net.dns.servers.empty() ? std::string() : ", from " + join(net.dns.servers, ", "))
                : net.dns.servers.empty() ? "to any server"
                                          : "to " + join(net.dns.servers, ", "));
            if (net.allow.empty()) out << "  (no destinations allowed)\n";
            for (const auto& rule : net.allow) {
                out << fmt::format("  allow {:<40} from {}{}\n", rule.entry(), rule.origin,
                                   rule.expires != 0 ? ", until " + utc_time(rule.expires) : std::string());
            }
            for (const auto& budget : net.budgets) {
                out << fmt::format("  budget {:<39} {} bytes up\n", policy::destination_text(budget.host, budget.port),
                                   budget.bytes);
            }
            if (net.default_budget != 0) {
                out << fmt::format("  budget {:<39} {} bytes up to each\n", "(any other destination)",
                                   net.default_budget);
            }
        }
    }
    for (const auto& widening : info.widenings) out << "Warning:     " << widening << "\n";
}

std::string utc_time(std::int64_t seconds) {
    return core::utc_stamp(std::chrono::system_clock::time_point(std::chrono::seconds(seconds)));
}

}  // namespace agentctl::cli
