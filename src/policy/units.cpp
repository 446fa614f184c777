// Sizes ("4GiB") and `--port [addr:]host:guest[/tcp|udp]`.
#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "policy/profile.hpp"
#include "policy/units.hpp"

namespace agentctl::policy {
namespace {

struct Unit {
    std::string_view suffix;
    std::uint64_t factor;
};

constexpr Unit k_units[] = {
    {"KiB", 1ULL << 10}, {"MiB", 1ULL << 20},   {"GiB", 1ULL << 30},      {"TiB", 1ULL << 40}, {"KB", 1000ULL},
    {"MB", 1000000ULL},  {"GB", 1000000000ULL}, {"TB", 1000000000000ULL}, {"B", 1ULL},
};

std::optional<std::uint16_t> parse_port_number(std::string_view text) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 65535) {
        return std::nullopt;
    }
    return static_cast<std::uint16_t>(value);
}

[[noreturn]] void bad_port(std::string_view text, std::string_view what) {
    throw Error(fmt::format("invalid --port \"{}\": {}", text, what),
                "write --port [ADDRESS:]HOST_PORT:GUEST_PORT[/tcp|udp], e.g. --port 8080:80");
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
    std::uint64_t factor = 1;
    for (const auto& unit : k_units) {
        if (text.size() > unit.suffix.size() && text.ends_with(unit.suffix)) {
            factor = unit.factor;
            text.remove_suffix(unit.suffix.size());
            break;
        }
    }
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value == 0) return std::nullopt;
    if (value > UINT64_MAX / factor) return std::nullopt;
    return value * factor;
}

std::string size_problem(std::string_view text, bool memory) {
    const auto bytes = parse_size(text);
    if (!bytes) {
        std::string problem = "a size above 0 such as 4GiB, 512MiB or 20GB";
        // docker's and Incus's single-letter units: 4G, 512m.
        if (text.size() > 1) {
            const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
            const auto number = text.substr(0, text.size() - 1);
            if ((unit == 'K' || unit == 'M' || unit == 'G' || unit == 'T') && parse_size(number)) {
                problem += fmt::format("; did you mean {}{}iB?", number, unit);
            }
        }
        return problem;
    }
    if (memory && *bytes < k_min_memory_bytes) {
        return fmt::format("at least {}MiB: a sandbox cannot boot with less", k_min_memory_bytes >> 20);
    }
    return {};
}

PortForward parse_port_flag(std::string_view text) {
    PortForward forward;
    std::string_view rest = text;
    if (auto slash = rest.rfind('/'); slash != std::string_view::npos) {
        auto protocol = rest.substr(slash + 1);
        if (protocol != "tcp" && protocol != "udp")
            bad_port(text, fmt::format("protocol \"{}\" is not tcp or udp", protocol));
        forward.protocol = std::string(protocol);
        rest = rest.substr(0, slash);
    }
    auto last = rest.rfind(':');
    if (last == std::string_view::npos) bad_port(text, "it needs HOST_PORT:GUEST_PORT");
    auto guest = parse_port_number(rest.substr(last + 1));
    rest = rest.substr(0, last);
    auto colon = rest.rfind(':');
    auto host = parse_port_number(colon == std::string_view::npos ? rest : rest.substr(colon + 1));
    if (!host || !guest) bad_port(text, "ports are whole numbers from 1 to 65535");
    forward.host_port = *host;
    forward.guest_port = *guest;
    if (colon != std::string_view::npos) {
        auto address = rest.substr(0, colon);
        if (address.size() >= 2 && address.front() == '[' && address.back() == ']')
            address = address.substr(1, address.size() - 2);
        auto ip = parse_ip_literal(address);
        if (!ip || (!ip->v6 && std::count(address.begin(), address.end(), '.') != 3)) {
            bad_port(text, fmt::format("listen address \"{}\" is not an IP address in dotted or IPv6 form", address));
        }
        forward.listen_address = ip->to_string();
    }
    return forward;
}

}  // namespace agentctl::policy
