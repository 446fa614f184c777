// agentctl/host_network.hpp: the one sockaddr conversion and the interface
// list every module reads this machine's addresses from.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>

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
