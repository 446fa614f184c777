// This machine's view of the network, the one seam every module goes through:
// host names looked up (Resolver) and the addresses on this machine's
// interfaces. `policy check`, the egress proxy, the Incus provider's ACLs and
// remote detection, and the bridge subnet choice all read these. The real
// implementation is src/policy/host_network.cpp; tests use
// tests/support/fake_resolver.hpp.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentctl/policy.hpp"

struct sockaddr;

namespace agentctl::policy {

// Every bridge agentctl makes for a sandbox is named with this prefix: the
// egress proxy listens only on such a bridge (or loopback), and the Incus
// provider names its bridges with it.
inline constexpr std::string_view k_sandbox_bridge_prefix = "agc-";

// Looks host names up.
class Resolver {
public:
    virtual ~Resolver() = default;
    // Every address of `host`, in the resolver's order, each once; empty when
    // the name does not resolve. Never throws for a lookup failure.
    [[nodiscard]] virtual std::vector<IpAddress> resolve(const std::string& host) = 0;
};

// getaddrinfo (AF_UNSPEC, SOCK_STREAM).
[[nodiscard]] std::unique_ptr<Resolver> make_system_resolver();

// One address configured on one of this machine's interfaces.
struct InterfaceAddress {
    std::string interface;  // "lo", "eth0", "agc-..."
    IpAddress address;
    std::optional<int> prefix_length;  // leading one bits of the netmask; none when it has no netmask
};

// Every IPv4 and IPv6 address on this machine's interfaces (getifaddrs), in
// the order the kernel lists them. Empty when they cannot be listed.
[[nodiscard]] std::vector<InterfaceAddress> interface_addresses();

// The distinct addresses of interface_addresses(): this machine's own
// addresses, which decide() always refuses.
[[nodiscard]] std::vector<IpAddress> host_own_addresses();

// Asks this machine's kernel where it would send a connection to an address
// (for the egress proxy's last check before dialling, policy::vet_route).
// One per thread: an instance is not shared between threads.
class RouteTable {
public:
    virtual ~RouteTable() = default;
    // The route to `address` as the kernel has it now. Never throws; RouteKind::Unknown when it cannot say.
    [[nodiscard]] virtual Route route_to(const IpAddress& address) = 0;
};

// Linux: one rtnetlink RTM_GETROUTE per call (a local, anycast or broadcast
// route is HostLocal), and for a route out of a bridge, whether that bridge's
// ports are all veth or tap (RTM_GETLINK, remembered for a second per bridge).
// Elsewhere: whether the address can be bound (HostLocal) or not (Away).
[[nodiscard]] std::unique_ptr<RouteTable> make_kernel_route_table();

// An address range: `length` leading bits of `address`.
struct IpPrefix {
    IpAddress address;
    int length = 0;
    friend bool operator==(const IpPrefix&, const IpPrefix&) = default;
};

// Whether `address` is inside `prefix` (same family).
[[nodiscard]] bool prefix_contains(const IpPrefix& prefix, const IpAddress& address);

// The IPv4 ranges a Linux kernel delivers to itself, read from its
// /proc/net/fib_trie text: every LOCAL, BROADCAST, ANYCAST and MULTICAST
// route of any table (its own addresses, its bridges' gateways, their
// broadcast addresses, 127/8). Lines it does not know are skipped.
[[nodiscard]] std::vector<IpPrefix> fib_trie_local_prefixes(std::string_view fib_trie);

// The route table of a proxy that runs in an instance on an Incus server's
// bridge (a companion instance): `own` (the instance's kernel) first; an
// address that one sends away is then looked up in the server's own local
// routing table, read from `server_fib_trie` at each call (the server's
// /proc/net/fib_trie, mounted read-only into the instance: what the server's
// kernel delivers to itself at that moment, every address it gained since
// the instance started included). An address there is HostLocal (interface
// "the Incus server's routing table"); a table that cannot be read makes
// every address Unknown (refused). IPv4 only: the companion has no IPv6.
[[nodiscard]] std::unique_ptr<RouteTable> make_server_route_table(std::string server_fib_trie,
                                                                  std::unique_ptr<RouteTable> own);

// decide(), then the kernel's word on the address it chose (vet_route with
// `routes`): an address the route refuses is dropped and the rest decided
// again. A refusal by the route wins over the policy's refusal of the
// remaining addresses. What the egress proxy dials, and `policy check` shows.
[[nodiscard]] Decision decide_dialled(const NetworkPolicy& policy, std::string_view host, std::uint16_t port,
                                      std::vector<IpAddress> addresses, std::span<const IpAddress> host_own_addresses,
                                      RouteTable& routes);

// The address in a sockaddr_in or sockaddr_in6; nullopt for a null pointer or
// any other family.
[[nodiscard]] std::optional<IpAddress> from_sockaddr(const sockaddr* address);

}  // namespace agentctl::policy
