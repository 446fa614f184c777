#include "provider/incus/network/subnet_pool.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <sstream>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/host_network.hpp"
#include "core/files.hpp"

namespace agentctl::provider::incus {
namespace {

std::optional<std::uint32_t> parse_ipv4(std::string_view text) {
    std::uint32_t value = 0;
    int parts = 0;
    while (parts < 4) {
        unsigned octet = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), octet);
        if (ec != std::errc() || octet > 255 || end == text.data()) return std::nullopt;
        value = (value << 8) | octet;
        ++parts;
        text.remove_prefix(static_cast<std::size_t>(end - text.data()));
        if (parts < 4) {
            if (text.empty() || text[0] != '.') return std::nullopt;
            text.remove_prefix(1);
        }
    }
    if (!text.empty()) return std::nullopt;
    return value;
}

int prefix_from_mask(std::uint32_t mask) {
    int prefix = 0;
    while (prefix < 32 && (mask & (std::uint32_t{1} << (31 - prefix))) != 0) ++prefix;
    return prefix;
}

}  // namespace

std::string Ipv4Net::address_text() const {
    return fmt::format("{}.{}.{}.{}", address >> 24, (address >> 16) & 255, (address >> 8) & 255, address & 255);
}

std::string Ipv4Net::to_string() const { return fmt::format("{}/{}", address_text(), prefix); }

std::string Ipv4Net::netmask_text() const { return Ipv4Net{mask(), 32}.address_text(); }

std::optional<Ipv4Net> parse_ipv4_net(std::string_view text) {
    auto slash = text.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    auto address = parse_ipv4(text.substr(0, slash));
    int prefix = -1;
    auto digits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (!address || ec != std::errc() || end != digits.data() + digits.size() || prefix < 0 || prefix > 32) {
        return std::nullopt;
    }
    return Ipv4Net{*address, prefix};
}

Ipv4Net pick_subnet(const Ipv4Net& pool, int prefix, const std::vector<Ipv4Net>& used) {
    if (prefix < pool.prefix || prefix > 30) {
        throw Error(fmt::format("cannot split the Incus subnet pool {} into /{} subnets", pool.to_string(), prefix),
                    "set incus.subnetPool to a network larger than /30, e.g. 10.213.0.0/16");
    }
    const std::uint64_t count = std::uint64_t{1} << (prefix - pool.prefix);
    const std::uint32_t step = prefix == 0 ? 0 : std::uint32_t{1} << (32 - prefix);
    for (std::uint64_t i = 0; i < count; ++i) {
        Ipv4Net candidate{pool.network() + static_cast<std::uint32_t>(i) * step, prefix};
        bool taken = false;
        for (const auto& net : used) {
            if (candidate.overlaps(net)) {
                taken = true;
                break;
            }
        }
        if (!taken) return candidate;
    }
    throw Error(fmt::format("every /{} subnet of the Incus subnet pool {} is already in use on this host", prefix,
                            pool.to_string()),
                "delete unused sandboxes, or set another pool: agentctl config set incus.subnetPool=10.214.0.0/16");
}

std::vector<Ipv4Net> parse_proc_net_route(std::string_view content) {
    // Iface Destination Gateway Flags RefCnt Use Metric Mask ... (hex, little-endian)
    std::vector<Ipv4Net> nets;
    std::istringstream lines{std::string(content)};
    std::string line;
    std::getline(lines, line);  // header
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        std::string iface, destination, gateway, flags, refcnt, use, metric, mask;
        if (!(fields >> iface >> destination >> gateway >> flags >> refcnt >> use >> metric >> mask)) continue;
        std::uint32_t dest_le = 0, mask_le = 0;
        if (std::from_chars(destination.data(), destination.data() + destination.size(), dest_le, 16).ec !=
                std::errc() ||
            std::from_chars(mask.data(), mask.data() + mask.size(), mask_le, 16).ec != std::errc()) {
            continue;
        }
        const std::uint32_t dest = ntohl(dest_le), net_mask = ntohl(mask_le);
        if (net_mask == 0) continue;  // the default route covers everything; it is not "in use"
        nets.push_back({dest, prefix_from_mask(net_mask)});
    }
    return nets;
}

std::vector<Ipv4Net> host_ipv4_networks() {
    std::vector<Ipv4Net> nets;
    if (auto routes = core::read_file_if_exists("/proc/net/route")) nets = parse_proc_net_route(*routes);
    for (const auto& entry : policy::interface_addresses()) {
        if (entry.address.v6 || !entry.prefix_length) continue;
        const auto& b = entry.address.bytes;
        const std::uint32_t address = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) |
                                      (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
        nets.push_back({address, *entry.prefix_length});
    }
    return nets;
}

}  // namespace agentctl::provider::incus
