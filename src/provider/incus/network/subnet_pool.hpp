// Choosing each sandbox bridge's IPv4 subnet from a pool, avoiding every subnet
// already in use on the host (its routes and interface addresses) and by
// Incus's own networks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::provider::incus {

struct Ipv4Net {
    std::uint32_t address = 0;  // host byte order; may carry host bits (10.1.2.1/24)
    int prefix = 0;

    [[nodiscard]] std::uint32_t mask() const { return prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix); }
    [[nodiscard]] std::uint32_t network() const { return address & mask(); }
    [[nodiscard]] std::uint32_t last() const { return network() | ~mask(); }
    [[nodiscard]] bool overlaps(const Ipv4Net& other) const {
        return network() <= other.last() && other.network() <= last();
    }
    // The Nth address of the network (1 = the first host address).
    [[nodiscard]] Ipv4Net host(std::uint32_t n) const { return {network() + n, prefix}; }
    [[nodiscard]] std::string address_text() const;  // 10.1.2.1
    [[nodiscard]] std::string to_string() const;     // 10.1.2.1/24
    [[nodiscard]] std::string netmask_text() const;  // 255.255.255.0
};

// "10.213.0.0/16" or "10.1.2.1/24"; nullopt if malformed.
[[nodiscard]] std::optional<Ipv4Net> parse_ipv4_net(std::string_view text);

// The first `prefix`-sized subnet of `pool` that overlaps none of `used`.
// Throws agentctl::Error naming the pool when every subnet is taken, or when
// `prefix` does not fit in the pool.
[[nodiscard]] Ipv4Net pick_subnet(const Ipv4Net& pool, int prefix, const std::vector<Ipv4Net>& used);

// Parses /proc/net/route: every destination network except the default route.
[[nodiscard]] std::vector<Ipv4Net> parse_proc_net_route(std::string_view content);

// The host's IPv4 networks in use: /proc/net/route plus every interface
// address with its netmask (policy::interface_addresses).
[[nodiscard]] std::vector<Ipv4Net> host_ipv4_networks();

}  // namespace agentctl::provider::incus
