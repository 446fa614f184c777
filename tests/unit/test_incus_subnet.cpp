#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "provider/incus/network/subnet_pool.hpp"

using namespace agentctl::provider::incus;

TEST_CASE("IPv4 networks parse and print", "[subnet]") {
    auto net = parse_ipv4_net("10.1.2.1/24");
    REQUIRE(net);
    CHECK(net->to_string() == "10.1.2.1/24");
    CHECK(net->network() == 0x0a010200);
    CHECK(net->host(1).address_text() == "10.1.2.1");
    CHECK_FALSE(parse_ipv4_net("10.1.2/24"));
    CHECK_FALSE(parse_ipv4_net("10.1.2.300/24"));
    CHECK_FALSE(parse_ipv4_net("10.1.2.3/33"));
    CHECK_FALSE(parse_ipv4_net("10.1.2.3"));
}

TEST_CASE("the first free subnet of the pool is picked", "[subnet]") {
    auto pool = *parse_ipv4_net("10.213.0.0/16");
    CHECK(pick_subnet(pool, 28, {}).to_string() == "10.213.0.0/28");
    // Taken by a sandbox bridge (host address inside) and by a host route.
    std::vector<Ipv4Net> used{*parse_ipv4_net("10.213.0.1/28"), *parse_ipv4_net("10.213.0.16/29")};
    CHECK(pick_subnet(pool, 28, used).to_string() == "10.213.0.32/28");
    // A host LAN covering the start of the pool.
    used.push_back(*parse_ipv4_net("10.213.0.0/20"));
    CHECK(pick_subnet(pool, 28, used).to_string() == "10.213.16.0/28");
    // Full pool.
    CHECK_THROWS_WITH(pick_subnet(pool, 28, {*parse_ipv4_net("10.0.0.0/8")}), Catch::Contains("already in use"));
    CHECK_THROWS_AS(pick_subnet(pool, 8, {}), agentctl::Error);
}

TEST_CASE("/proc/net/route is read without the default route", "[subnet]") {
    const char* table =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t0102A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
        "eth0\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        "agc-1\t00D50D0A\t00000000\t0001\t0\t0\t0\tF0FFFFFF\t0\t0\t0\n";
    auto nets = parse_proc_net_route(table);
    REQUIRE(nets.size() == 2);
    CHECK(nets[0].to_string() == "192.168.2.0/24");
    CHECK(nets[1].to_string() == "10.13.213.0/28");
}

TEST_CASE("the host's own networks include loopback", "[subnet]") {
    auto nets = host_ipv4_networks();
    bool loopback = false;
    for (const auto& n : nets) loopback = loopback || (n.network() == 0x7f000000 && n.prefix == 8);
    CHECK(loopback);
}
