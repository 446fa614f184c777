// `--allow` entries: every documented form, host-name rules, and allow files.
#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"
#include "core/files.hpp"
#include "policy/addresses.hpp"
#include "policy/allow_text.hpp"

namespace agentctl::policy {
namespace {

constexpr std::size_t k_max_entry_length = 1024;

[[noreturn]] void bad_entry(std::string_view entry, std::string_view what, std::string hint = {}) {
    throw Error(fmt::format("invalid allow entry \"{}\": {}", entry, what), std::move(hint));
}

bool is_numeric_label(std::string_view label) {
    if (label.empty()) return false;
    if (label.size() >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X')) {
        return std::all_of(label.begin() + 2, label.end(),
                           [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    }
    return std::all_of(label.begin(), label.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string trim(std::string_view text) {
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return std::string(text);
}

// "80,443" -> {80, 443}, sorted and unique.
std::vector<std::uint16_t> parse_ports(std::string_view entry, std::string_view list) {
    std::vector<std::uint16_t> ports;
    if (list.empty())
        bad_entry(entry, "the port list after ':' is empty", "write host:PORT or leave out the ':' for any port");
    while (true) {
        auto comma = list.find(',');
        auto text = list.substr(0, comma);
        unsigned value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
            bad_entry(entry, fmt::format("port \"{}\" is not a number", text),
                      "ports are whole numbers from 1 to 65535");
        }
        if (value < 1 || value > 65535) {
            bad_entry(entry, fmt::format("port {} is outside 1-65535", text),
                      "ports are whole numbers from 1 to 65535");
        }
        ports.push_back(static_cast<std::uint16_t>(value));
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    std::sort(ports.begin(), ports.end());
    ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
    return ports;
}

// ::ffff:a.b.c.d names the IPv4 address a.b.c.d; a rule keeps the IPv4 form
// so that every consumer (the proxy, the Incus ACL) sees one spelling.
IpAddress unmapped(const IpAddress& ip) {
    const auto& b = ip.bytes;
    bool mapped = ip.v6 && b[10] == 0xff && b[11] == 0xff &&
                  std::all_of(b.begin(), b.begin() + 10, [](std::uint8_t x) { return x == 0; });
    if (!mapped) return ip;
    IpAddress v4;
    std::copy(b.begin() + 12, b.end(), v4.bytes.begin());
    return v4;
}

// Fills kind and host from the host part of an entry (no port).
void parse_host(std::string_view entry, std::string_view host_text, AllowRule& rule) {
    if (host_text.empty()) bad_entry(entry, "the host is empty");
    if (host_text.front() == '[') {
        if (host_text.back() != ']') bad_entry(entry, "an IPv6 address opened with '[' is not closed with ']'");
        auto ip = parse_ip_literal(host_text);
        if (!ip || !ip->v6) bad_entry(entry, "the text inside [ ] is not an IPv6 address");
        rule.kind = HostKind::Ip;
        rule.host = unmapped(*ip).to_string();
        return;
    }
    std::string host = normalise_host(host_text);
    if (auto ip = parse_ip_literal(host)) {
        rule.kind = HostKind::Ip;
        rule.host = unmapped(*ip).to_string();
        return;
    }
    if (host.starts_with("*.")) {
        std::string domain = host.substr(2);
        if (auto problem = hostname_problem(domain); !problem.empty()) bad_entry(entry, problem);
        if (domain.find('.') == std::string::npos) {
            bad_entry(entry, fmt::format("\"*.{}\" would allow a whole top-level domain", domain),
                      "name the organisation's domain, e.g. *.example.com");
        }
        rule.kind = HostKind::Wildcard;
        rule.host = domain;
        return;
    }
    if (host.find('*') != std::string::npos) {
        bad_entry(entry, "'*' is only allowed as the whole first label (*.example.com)",
                  "*.example.com matches every subdomain of example.com (not example.com itself)");
    }
    if (auto problem = hostname_problem(host); !problem.empty()) bad_entry(entry, problem);
    rule.kind = HostKind::Name;
    rule.host = std::move(host);
}

void check_ip_rule_reachable(std::string_view entry, const AllowRule& rule) {
    if (rule.kind != HostKind::Ip) return;
    auto ip = parse_ip_literal(rule.host);
    auto address_class = classify(*ip);
    if (address_class == AddressClass::Public || address_class == AddressClass::Lan) return;
    bad_entry(entry,
              fmt::format("{} is a {} address, which agentctl always refuses", rule.host, to_string(address_class)),
              "allow rules can only name public addresses (or LAN addresses when deny-LAN is off)");
}

AllowRule parse_url(std::string_view entry, std::string_view rest, std::uint16_t default_port, std::string origin) {
    auto end = rest.find_first_of("/?#");
    auto authority = rest.substr(0, end);
    if (end != std::string_view::npos) {
        auto tail = rest.substr(end);
        if (tail != "/") {
            bad_entry(entry,
                      "a URL with a path, query or fragment cannot be enforced: filtering is by host and port only",
                      fmt::format("allow the host instead: {}:{}", authority, default_port));
        }
    }
    if (authority.find('@') != std::string_view::npos) {
        bad_entry(entry, "a URL with user information (user@host) is not accepted", "write the host alone");
    }
    AllowRule rule;
    rule.origin = std::move(origin);
    std::string_view host_part = authority;
    std::string_view port_part;
    if (!authority.empty() && authority.front() == '[') {
        auto close = authority.find(']');
        if (close == std::string_view::npos) bad_entry(entry, "an IPv6 address opened with '[' is not closed with ']'");
        host_part = authority.substr(0, close + 1);
        auto after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') bad_entry(entry, "unexpected text after ']'");
            port_part = after.substr(1);
            if (port_part.empty()) bad_entry(entry, "the port after ':' is empty");
        }
    } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
        host_part = authority.substr(0, colon);
        port_part = authority.substr(colon + 1);
        if (port_part.empty()) bad_entry(entry, "the port after ':' is empty");
    }
    parse_host(entry, host_part, rule);
    if (!port_part.empty()) {
        if (port_part.find(',') != std::string_view::npos) bad_entry(entry, "a URL names exactly one port");
        rule.ports = parse_ports(entry, port_part);
    } else {
        rule.ports = {default_port};
    }
    check_ip_rule_reachable(entry, rule);
    return rule;
}

}  // namespace

std::string ascii_lower(std::string_view text) {
    std::string out(text);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string normalise_host(std::string_view host) {
    std::string out = ascii_lower(host);
    if (!out.empty() && out.back() == '.') out.pop_back();
    return out;
}

std::string hostname_problem(std::string_view host) {
    if (host.empty()) return "the host name is empty";
    if (host.size() > 253) return fmt::format("the host name is {} characters long (at most 253)", host.size());
    std::string_view rest = host;
    std::string_view last;
    while (true) {
        auto dot = rest.find('.');
        auto label = rest.substr(0, dot);
        if (label.empty()) return "the host name has an empty label (two dots in a row, or a leading dot)";
        if (label.size() > 63) return fmt::format("the label \"{}\" is longer than 63 characters", label);
        for (char c : label) {
            auto u = static_cast<unsigned char>(c);
            if (u >= 0x80) return "the host name is not ASCII; write an internationalised name in its xn-- form";
            // '_' is not valid in a DNS host name (RFC 952) but common in internal names,
            // and resolvers pass it through.
            if (!(std::islower(u) || std::isdigit(u) || c == '-' || c == '_')) {
                return fmt::format("'{}' is not allowed in a host name (letters, digits, '-', '_' and '.')", c);
            }
        }
        if (label.front() == '-' || label.back() == '-') {
            return fmt::format("the label \"{}\" starts or ends with '-'", label);
        }
        last = label;
        if (dot == std::string_view::npos) break;
        rest.remove_prefix(dot + 1);
    }
    if (is_numeric_label(last)) return "it looks like an IP address but is not a valid one";
    return {};
}

std::string AllowRule::entry() const {
    std::string text;
    if (kind == HostKind::Wildcard) {
        text = "*." + host;
    } else if (kind == HostKind::Ip && host.find(':') != std::string::npos) {
        text = ports.empty() ? host : "[" + host + "]";
    } else {
        text = host;
    }
    if (!ports.empty()) {
        text += ':';
        for (std::size_t i = 0; i < ports.size(); ++i) {
            if (i > 0) text += ',';
            text += std::to_string(ports[i]);
        }
    }
    return text;
}

AllowRule parse_allow_entry(std::string_view raw_entry, std::string origin) {
    if (raw_entry.size() > k_max_entry_length) {
        throw Error(fmt::format("invalid allow entry: longer than {} characters", k_max_entry_length));
    }
    std::string trimmed = trim(raw_entry);
    std::string_view entry = trimmed;
    if (entry.empty()) throw Error("invalid allow entry: the entry is empty", "write a host, e.g. example.com:443");
    for (char c : entry) {
        if (c == ' ' || c == '\t' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            bad_entry(entry, "it contains a space or a control character", "give one entry per --allow (or per line)");
        }
    }
    auto scheme_end = entry.find("://");
    if (scheme_end != std::string_view::npos) {
        std::string scheme = ascii_lower(entry.substr(0, scheme_end));
        auto rest = entry.substr(scheme_end + 3);
        if (scheme == "https") return parse_url(entry, rest, 443, std::move(origin));
        if (scheme == "http") return parse_url(entry, rest, 80, std::move(origin));
        bad_entry(entry, fmt::format("the scheme \"{}\" is not supported (only http:// and https://)", scheme),
                  "write host:PORT");
    }
    if (entry.find('/') != std::string_view::npos) {
        bad_entry(entry, "'/' is not allowed: filtering is by host and port only, never by path or network range",
                  "write the host alone, e.g. example.com:443");
    }
    AllowRule rule;
    rule.origin = std::move(origin);
    if (entry.front() == '[') {
        auto close = entry.find(']');
        if (close == std::string_view::npos) bad_entry(entry, "an IPv6 address opened with '[' is not closed with ']'");
        parse_host(entry, entry.substr(0, close + 1), rule);
        auto after = entry.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') bad_entry(entry, "unexpected text after ']'", "write [v6]:PORT");
            rule.ports = parse_ports(entry, after.substr(1));
        }
    } else if (std::count(entry.begin(), entry.end(), ':') > 1) {
        auto ip = parse_ip_literal(entry);
        if (!ip || !ip->v6) {
            bad_entry(entry, "it has several ':' but is not an IPv6 address",
                      "write an IPv6 address with a port as [v6]:PORT");
        }
        rule.kind = HostKind::Ip;
        rule.host = unmapped(*ip).to_string();
    } else if (auto colon = entry.find(':'); colon != std::string_view::npos) {
        parse_host(entry, entry.substr(0, colon), rule);
        rule.ports = parse_ports(entry, entry.substr(colon + 1));
    } else {
        parse_host(entry, entry, rule);
    }
    check_ip_rule_reachable(entry, rule);
    return rule;
}

std::vector<AllowRule> parse_allow_text(std::string_view text, const std::string& label) {
    constexpr std::string_view k_byte_order_mark = "\xEF\xBB\xBF";
    if (text.starts_with(k_byte_order_mark)) text.remove_prefix(k_byte_order_mark.size());
    std::vector<AllowRule> rules;
    std::vector<std::string> problems;
    std::string hint;
    int line_number = 0;
    while (!text.empty()) {
        ++line_number;
        auto newline = text.find('\n');
        auto line = text.substr(0, newline);
        text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
        auto hash = line.find('#');
        auto content = trim(line.substr(0, hash));
        if (content.empty()) continue;
        try {
            rules.push_back(parse_allow_entry(content, fmt::format("allow file {}:{}", label, line_number)));
        } catch (const Error& error) {
            problems.push_back(fmt::format("{}:{}: {}", label, line_number, error.what()));
            if (hint.empty()) hint = error.hint();
        }
    }
    if (problems.size() == 1) throw Error(problems.front(), hint);
    if (!problems.empty()) {
        std::string message = fmt::format("{} has {} invalid lines:", label, problems.size());
        for (const auto& problem : problems) message += "\n  " + problem;
        throw Error(message, hint);
    }
    return rules;
}

std::vector<AllowRule> load_allow_file(const std::string& path) {
    auto text = core::read_file_if_exists(path);
    if (!text)
        throw Error(fmt::format("allow file {} does not exist", path),
                    "check the path; it is read relative to the working directory");
    return parse_allow_text(*text, path);
}

}  // namespace agentctl::policy
