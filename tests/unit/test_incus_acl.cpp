// The ACL builder: policy + resolved names -> Incus ACL egress rules
// (https://linuxcontainers.org/incus/docs/main/howto/network_acls/: rule
// fields action, state, protocol, destination, destination_port, description).
#include <catch2/catch.hpp>

#include "provider/incus/acl_rules.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

policy::IpAddress ip(const char* text) { return *policy::parse_ip_literal(text); }

bool has_rule(const Json& rules, const std::string& destination, const std::string& protocol, const std::string& ports) {
    for (const auto& r : rules) {
        if (r.value("destination", "") == destination && r.value("protocol", "") == protocol &&
            r.value("destination_port", "") == ports) {
            CHECK(r["action"] == "allow");
            CHECK(r["state"] == "enabled");
            return true;
        }
    }
    return false;
}

}  // namespace

TEST_CASE("default policy: DNS to any server, nothing else", "[acl]") {
    policy::NetworkPolicy network;
    auto rules = build_acl_rules(network, {});
    CHECK(rules.egress.size() == 2);
    CHECK(has_rule(rules.egress, "", "udp", "53"));
    CHECK(has_rule(rules.egress, "", "tcp", "53"));
}

TEST_CASE("DNS restricted to servers, or disabled", "[acl]") {
    policy::NetworkPolicy network;
    network.dns.servers = {"1.1.1.1", "2606:4700:4700::1111"};
    auto rules = build_acl_rules(network, {});
    CHECK(rules.egress.size() == 4);
    CHECK(has_rule(rules.egress, "1.1.1.1/32", "udp", "53"));
    CHECK(has_rule(rules.egress, "2606:4700:4700::1111/128", "tcp", "53"));
    network.dns.disabled = true;
    CHECK(build_acl_rules(network, {}).egress.empty());
}

TEST_CASE("one rule per resolved address and port set; LAN dropped under deny-LAN", "[acl]") {
    policy::NetworkPolicy network;
    network.dns.disabled = true;
    network.allow.push_back(policy::parse_allow_entry("example.com:80,443", "--allow"));
    network.allow.push_back(policy::parse_allow_entry("internal.corp", "--allow"));
    network.allow.push_back(policy::parse_allow_entry("93.184.216.34:8443", "allow file x:3"));
    network.allow.push_back(policy::parse_allow_entry("10.0.0.5:22", "--allow"));
    ResolvedNames resolved{{"example.com", {ip("93.184.216.34"), ip("2606:2800:220:1:248:1893:25c8:1946")}},
                           {"internal.corp", {ip("192.168.1.10"), ip("127.0.0.1")}}};
    auto rules = build_acl_rules(network, resolved);
    CHECK(has_rule(rules.egress, "93.184.216.34/32", "tcp", "80,443"));
    CHECK(has_rule(rules.egress, "2606:2800:220:1:248:1893:25c8:1946/128", "tcp", "80,443"));
    CHECK(has_rule(rules.egress, "93.184.216.34/32", "tcp", "8443"));
    CHECK(rules.egress.size() == 3);  // no LAN, no loopback
    // Every dropped address is reported.
    CHECK(rules.notes.size() == 3);
    std::string all;
    for (const auto& n : rules.notes) all += n + "\n";
    CHECK_THAT(all, Catch::Contains("192.168.1.10") && Catch::Contains("deny-LAN") && Catch::Contains("127.0.0.1") &&
                        Catch::Contains("10.0.0.5"));
}

TEST_CASE("allow-LAN opens every private and link-local range, v4 and v6", "[acl]") {
    policy::NetworkPolicy network;
    network.deny_lan = false;
    network.allow_lan = true;
    network.dns.disabled = true;
    network.allow.push_back(policy::parse_allow_entry("10.0.0.5:22", "--allow"));
    auto rules = build_acl_rules(network, {});
    for (const auto& range : lan_ranges()) CHECK(has_rule(rules.egress, range, "", ""));
    CHECK(rules.egress.size() == lan_ranges().size());  // the LAN IP rule is covered, not repeated
    CHECK(rules.notes.empty());
}

TEST_CASE("wildcards and unresolvable names are reported, never widened", "[acl]") {
    policy::NetworkPolicy network;
    network.dns.disabled = true;
    network.allow.push_back(policy::parse_allow_entry("*.example.com", "--allow"));
    network.allow.push_back(policy::parse_allow_entry("nowhere.invalid:443", "--allow"));
    auto rules = build_acl_rules(network, {{"nowhere.invalid", {}}});
    CHECK(rules.egress.empty());
    REQUIRE(rules.notes.size() == 2);
    CHECK_THAT(rules.notes[0], Catch::Contains("wildcard"));
    CHECK_THAT(rules.notes[1], Catch::Contains("did not resolve"));
}

TEST_CASE("duplicate destinations collapse; any TCP port has no port field", "[acl]") {
    policy::NetworkPolicy network;
    network.dns.disabled = true;
    network.allow.push_back(policy::parse_allow_entry("a.example", "--allow"));
    network.allow.push_back(policy::parse_allow_entry("b.example", "preset x"));
    auto rules = build_acl_rules(network, {{"a.example", {ip("8.8.8.8")}}, {"b.example", {ip("8.8.8.8")}}});
    REQUIRE(rules.egress.size() == 1);
    CHECK(rules.egress[0]["protocol"] == "tcp");
    CHECK_FALSE(rules.egress[0].contains("destination_port"));
}

TEST_CASE("the system resolver resolves through getaddrinfo", "[acl]") {
    auto resolver = make_system_resolver();
    auto addresses = resolver->resolve("localhost");
    REQUIRE_FALSE(addresses.empty());
    CHECK(policy::classify(addresses[0]) == policy::AddressClass::Loopback);
    CHECK(resolver->resolve("does-not-exist.invalid").empty());
}

TEST_CASE("ACL payload", "[acl]") {
    AclRules rules;
    rules.egress.push_back({{"action", "allow"}});
    auto payload = acl_payload("demo", rules);
    CHECK(payload["name"] == "agentctl-demo");
    CHECK(payload["ingress"] == Json::array());
    CHECK(payload["config"]["user.agentctl.sandbox"] == "demo");
}
