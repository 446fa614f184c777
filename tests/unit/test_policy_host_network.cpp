// agentctl/host_network.hpp: the one sockaddr conversion and the interface
// list every module reads this machine's addresses from.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "agentctl/host_network.hpp"

using namespace agentctl::policy;

TEST_CASE("from_sockaddr reads IPv4 and IPv6 addresses and nothing else", "[host_network]") {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    REQUIRE(::inet_pton(AF_INET, "192.0.2.7", &v4.sin_addr) == 1);
    auto a = from_sockaddr(reinterpret_cast<const sockaddr*>(&v4));
    REQUIRE(a);
    CHECK_FALSE(a->v6);
    CHECK(a->to_string() == "192.0.2.7");

    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    v6.sin6_scope_id = 3;  // plays no part in the address
    REQUIRE(::inet_pton(AF_INET6, "fe80::1", &v6.sin6_addr) == 1);
    auto b = from_sockaddr(reinterpret_cast<const sockaddr*>(&v6));
    REQUIRE(b);
    CHECK(b->v6);
    CHECK(*b == *parse_ip_literal("fe80::1"));

    sockaddr_un local{};
    local.sun_family = AF_UNIX;
    CHECK_FALSE(from_sockaddr(reinterpret_cast<const sockaddr*>(&local)));
    CHECK_FALSE(from_sockaddr(nullptr));
}

TEST_CASE("the interface list names loopback with its prefix, and own addresses are its distinct addresses",
          "[host_network][system]") {
    const auto interfaces = interface_addresses();
    const auto loopback = *parse_ip_literal("127.0.0.1");
    auto lo = std::find_if(interfaces.begin(), interfaces.end(),
                           [&](const InterfaceAddress& entry) { return entry.address == loopback; });
    REQUIRE(lo != interfaces.end());
    CHECK_FALSE(lo->interface.empty());
    CHECK(lo->prefix_length == 8);

    const auto own = host_own_addresses();
    for (const auto& entry : interfaces) CHECK(std::count(own.begin(), own.end(), entry.address) == 1);
    CHECK(own.size() <= interfaces.size());
}

TEST_CASE("the kernel route table says every address of this machine is its own, now", "[host_network]") {
    auto routes = make_kernel_route_table();
    for (const auto& entry : interface_addresses()) {
        if (entry.address.v6 && entry.address.bytes[0] == 0xfe && (entry.address.bytes[1] & 0xc0) == 0x80)
            continue;  // link-local: needs its interface to be routed at all
        INFO(entry.interface << " " << entry.address.to_string());
        CHECK(routes->route_to(entry.address).kind == RouteKind::HostLocal);
    }
    CHECK(routes->route_to(*parse_ip_literal("127.0.0.1")).kind == RouteKind::HostLocal);
    CHECK(routes->route_to(*parse_ip_literal("::ffff:127.0.0.1")).kind == RouteKind::HostLocal);
    // A documentation address is no address of this machine: only asked about, never sent to.
    CHECK(routes->route_to(*parse_ip_literal("198.51.100.7")).kind != RouteKind::HostLocal);
}

namespace {

// The local table of a server with an uplink, one bridge and a second address
// on the uplink, as /proc/net/fib_trie shows it (tables merged: one trie).
constexpr const char* k_server_fib_trie = R"(Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.222.4.0/24 2 0 2
        +-- 10.222.4.0/30 2 0 2
           |-- 10.222.4.0
              /24 link UNICAST
           |-- 10.222.4.1
              /32 host LOCAL
        |-- 10.222.4.255
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     |-- 198.51.100.9
        /32 host LOCAL tos=0
     |-- 203.0.113.0
        /24 link UNICAST
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 192.0.2.77
        /32 host LOCAL
)";

class AlwaysAway final : public RouteTable {
public:
    Route route_to(const IpAddress&) override { return Route{}; }
};

}  // namespace

TEST_CASE("a server's fib_trie gives the ranges it delivers to itself, and only those", "[host_network]") {
    const auto prefixes = fib_trie_local_prefixes(k_server_fib_trie);
    auto has = [&](const char* address, int length) {
        return std::find(prefixes.begin(), prefixes.end(), IpPrefix{*parse_ip_literal(address), length}) !=
               prefixes.end();
    };
    CHECK(has("10.222.4.1", 32));
    CHECK(has("10.222.4.255", 32));
    CHECK(has("127.0.0.0", 8));
    CHECK(has("198.51.100.9", 32));
    CHECK(has("192.0.2.77", 32));
    CHECK_FALSE(has("0.0.0.0", 0));       // the default route is not the server
    CHECK_FALSE(has("10.222.4.0", 24));   // the bridge's subnet is its instances
    CHECK_FALSE(has("203.0.113.0", 24));  // a route out
    CHECK(prefixes.size() == 7);
    CHECK(fib_trie_local_prefixes("").empty());
    CHECK(fib_trie_local_prefixes("garbage\n/32 host LOCAL\n|-- nonsense\n   /32 host LOCAL\n").empty());
}

TEST_CASE("prefix_contains compares the leading bits of one family", "[host_network]") {
    const IpPrefix loopback{*parse_ip_literal("127.0.0.0"), 8};
    CHECK(prefix_contains(loopback, *parse_ip_literal("127.9.8.7")));
    CHECK_FALSE(prefix_contains(loopback, *parse_ip_literal("128.0.0.1")));
    CHECK_FALSE(prefix_contains(loopback, *parse_ip_literal("::1")));
    CHECK(prefix_contains(IpPrefix{*parse_ip_literal("10.1.2.3"), 32}, *parse_ip_literal("10.1.2.3")));
    CHECK_FALSE(prefix_contains(IpPrefix{*parse_ip_literal("10.1.2.3"), 32}, *parse_ip_literal("10.1.2.4")));
    CHECK(prefix_contains(IpPrefix{*parse_ip_literal("0.0.0.0"), 0}, *parse_ip_literal("8.8.8.8")));
}

TEST_CASE("the server route table refuses the server's addresses as its table has them at each call",
          "[host_network]") {
    const auto path = std::filesystem::temp_directory_path() / ("agentctl-test-fib-trie-" + std::to_string(::getpid()));
    auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
    write(k_server_fib_trie);
    auto routes = make_server_route_table(path.string(), std::make_unique<AlwaysAway>());
    const auto gained = *parse_ip_literal("192.0.2.200");
    CHECK(routes->route_to(*parse_ip_literal("10.222.4.1")).kind == RouteKind::HostLocal);
    CHECK(routes->route_to(*parse_ip_literal("::ffff:198.51.100.9")).kind == RouteKind::HostLocal);
    CHECK(routes->route_to(*parse_ip_literal("10.222.4.2")).kind == RouteKind::Away);
    CHECK(routes->route_to(gained).kind == RouteKind::Away);
    // The server gains an address: the next call refuses it, no reload needed.
    write(std::string(k_server_fib_trie) + "     |-- 192.0.2.200\n        /32 host LOCAL\n");
    const auto route = routes->route_to(gained);
    CHECK(route.kind == RouteKind::HostLocal);
    CHECK(route.interface == "the Incus server's routing table");
    // No table to read: nothing can be said, so everything is refused.
    std::filesystem::remove(path);
    CHECK(routes->route_to(*parse_ip_literal("10.222.4.2")).kind == RouteKind::Unknown);
}

TEST_CASE("this machine's own fib_trie has every IPv4 address of its interfaces", "[host_network][system]") {
    std::ifstream in("/proc/net/fib_trie");
    if (!in) return;  // no procfs here
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto prefixes = fib_trie_local_prefixes(text);
    for (const auto& entry : interface_addresses()) {
        if (entry.address.v6) continue;
        INFO(entry.interface << " " << entry.address.to_string());
        CHECK(std::any_of(prefixes.begin(), prefixes.end(),
                          [&](const IpPrefix& prefix) { return prefix_contains(prefix, entry.address); }));
    }
}
