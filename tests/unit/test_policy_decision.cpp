// pre_decide()/decide(): allowlist matching, address vetting, deny-LAN and
// allow-LAN, bare IPs in every spelling, and a disabled policy.
#include <catch2/catch.hpp>

#include <string_view>
#include <utility>

#include "agentctl/policy.hpp"

using namespace agentctl::policy;

namespace {

IpAddress ip(std::string_view text) {
    auto address = parse_ip_literal(text);
    REQUIRE(address.has_value());
    return *address;
}

NetworkPolicy policy_with(std::initializer_list<const char*> entries) {
    NetworkPolicy policy;
    for (const char* entry : entries) policy.allow.push_back(parse_allow_entry(entry, "--allow"));
    return policy;
}

Decision decide_one(const NetworkPolicy& policy, std::string_view host, std::uint16_t port,
                    std::initializer_list<const char*> addresses, std::initializer_list<const char*> own = {}) {
    std::vector<IpAddress> resolved;
    for (const char* a : addresses) resolved.push_back(ip(a));
    std::vector<IpAddress> mine;
    for (const char* a : own) mine.push_back(ip(a));
    return decide(policy, host, port, resolved, mine);
}

}  // namespace

TEST_CASE("an exact name rule allows that name on its ports", "[decide]") {
    auto policy = policy_with({"api.example.com:443"});
    CHECK_FALSE(pre_decide(policy, "api.example.com", 443).has_value());
    CHECK_FALSE(pre_decide(policy, "API.Example.com.", 443).has_value());
    auto d = decide_one(policy, "api.example.com", 443, {"93.184.216.34"});
    CHECK(d.allowed);
    CHECK(d.reason == Reason::Allowlisted);
    CHECK(d.detail == "api.example.com port 443 is allowed by api.example.com:443 (from --allow)");
    REQUIRE(d.rule.has_value());
    CHECK(d.rule->entry() == "api.example.com:443");
    REQUIRE(d.address.has_value());
    CHECK(d.address->to_string() == "93.184.216.34");

    auto port = pre_decide(policy, "api.example.com", 80);
    REQUIRE(port.has_value());
    CHECK_FALSE(port->allowed);
    CHECK(port->reason == Reason::PortNotAllowed);
    CHECK(port->detail ==
          "api.example.com is allowed only on port 443 by api.example.com:443 (from --allow), not on port 80");

    auto other = pre_decide(policy, "example.com", 443);
    REQUIRE(other.has_value());
    CHECK(other->reason == Reason::NotAllowlisted);
    CHECK(other->detail == "no allow rule names example.com");
    CHECK(pre_decide(policy, "evilapi.example.com", 443)->reason == Reason::NotAllowlisted);
    CHECK(pre_decide(policy, "x.api.example.com", 443)->reason == Reason::NotAllowlisted);
}

TEST_CASE("a rule without ports allows any port", "[decide]") {
    auto policy = policy_with({"example.com"});
    CHECK(decide_one(policy, "example.com", 22, {"93.184.216.34"}).allowed);
    CHECK(decide_one(policy, "example.com", 65535, {"93.184.216.34"}).allowed);
    CHECK(pre_decide(policy, "example.com", 0)->reason == Reason::PortNotAllowed);
}

TEST_CASE("a wildcard covers every subdomain but not the apex", "[decide]") {
    auto policy = policy_with({"*.example.com:443"});
    CHECK(decide_one(policy, "a.example.com", 443, {"93.184.216.34"}).allowed);
    CHECK(decide_one(policy, "a.b.example.com", 443, {"93.184.216.34"}).allowed);
    CHECK(pre_decide(policy, "example.com", 443)->reason == Reason::NotAllowlisted);
    CHECK(pre_decide(policy, "badexample.com", 443)->reason == Reason::NotAllowlisted);
    CHECK(pre_decide(policy, "a.example.com.evil.net", 443)->reason == Reason::NotAllowlisted);
    CHECK(pre_decide(policy, "a.example.com", 80)->reason == Reason::PortNotAllowed);
}

TEST_CASE("an exact rule with the port wins over a wildcard without it", "[decide]") {
    auto policy = policy_with({"*.example.com:443", "git.example.com:22"});
    auto d = decide_one(policy, "git.example.com", 22, {"93.184.216.34"});
    CHECK(d.allowed);
    CHECK(d.rule->entry() == "git.example.com:22");
    CHECK(decide_one(policy, "git.example.com", 443, {"93.184.216.34"}).rule->entry() == "*.example.com:443");
}

TEST_CASE("every resolved address is vetted and the first that passes is dialled", "[decide]") {
    auto policy = policy_with({"example.com:443"});
    auto d = decide_one(policy, "example.com", 443, {"127.0.0.1", "10.1.2.3", "::1", "93.184.216.34", "1.1.1.1"});
    CHECK(d.allowed);
    CHECK(d.address->to_string() == "93.184.216.34");

    auto all_bad = decide_one(policy, "example.com", 443, {"127.0.0.1", "10.1.2.3"});
    CHECK_FALSE(all_bad.allowed);
    CHECK(all_bad.reason == Reason::Loopback);
    CHECK(all_bad.detail ==
          "127.0.0.1 is a loopback address; it would reach the host itself (and none of the other 1 addresses passed)");
    CHECK_FALSE(all_bad.address.has_value());

    auto none = decide_one(policy, "example.com", 443, {});
    CHECK(none.reason == Reason::NoAddress);
    CHECK(none.detail == "example.com did not resolve to any address");
}

TEST_CASE("always-refused classes are refused even when a rule matches", "[decide]") {
    auto policy = policy_with({"example.com"});
    CHECK(decide_one(policy, "example.com", 443, {"127.0.0.1"}).reason == Reason::Loopback);
    CHECK(decide_one(policy, "example.com", 443, {"::1"}).reason == Reason::Loopback);
    CHECK(decide_one(policy, "example.com", 443, {"::ffff:127.0.0.1"}).reason == Reason::Loopback);
    CHECK(decide_one(policy, "example.com", 443, {"64:ff9b::7f00:1"}).reason == Reason::Loopback);
    CHECK(decide_one(policy, "example.com", 443, {"0.0.0.0"}).reason == Reason::Unspecified);
    CHECK(decide_one(policy, "example.com", 443, {"::"}).reason == Reason::Unspecified);
    CHECK(decide_one(policy, "example.com", 443, {"224.0.0.251"}).reason == Reason::Multicast);
    CHECK(decide_one(policy, "example.com", 443, {"ff02::fb"}).reason == Reason::Multicast);
    CHECK(decide_one(policy, "example.com", 443, {"255.255.255.255"}).reason == Reason::Broadcast);
    CHECK(decide_one(policy, "example.com", 443, {"240.1.2.3"}).reason == Reason::Reserved);
    CHECK(decide_one(policy, "example.com", 443, {"2001:db8::1"}).reason == Reason::Reserved);
    auto own = decide_one(policy, "example.com", 443, {"203.0.114.9"}, {"203.0.114.9"});
    CHECK(own.reason == Reason::HostAddress);
    CHECK(own.detail == "203.0.114.9 is one of this machine's own addresses");
    CHECK(decide_one(policy, "example.com", 443, {"::ffff:203.0.114.9"}, {"203.0.114.9"}).reason ==
          Reason::HostAddress);
    // the always-refused set holds under allow-LAN too
    policy.allow_lan = true;
    policy.deny_lan = false;
    CHECK(decide_one(policy, "example.com", 443, {"127.0.0.1"}).reason == Reason::Loopback);
    CHECK(decide_one(policy, "example.com", 443, {"10.0.0.1"}, {"10.0.0.1"}).reason == Reason::HostAddress);
}

TEST_CASE("deny-LAN refuses LAN addresses even when a rule matches", "[decide][lan]") {
    auto policy = policy_with({"nas.example.com", "10.0.0.5"});
    for (const char* lan : {"10.0.0.5", "172.16.1.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "fd00::1",
                            "fe80::1", "fec0::1", "::ffff:192.168.1.1", "2002:c0a8:101::1", "64:ff9b::a00:1"}) {
        INFO(lan);
        auto d = decide_one(policy, "nas.example.com", 443, {lan});
        CHECK_FALSE(d.allowed);
        CHECK(d.reason == Reason::Lan);
    }
    CHECK(decide_one(policy, "nas.example.com", 443, {"10.0.0.5"}).detail ==
          "10.0.0.5 is a LAN address and deny-LAN is on");
    CHECK(pre_decide(policy, "10.0.0.5", 443)->reason == Reason::Lan);
}

TEST_CASE("allow-LAN opens every LAN address on any port, whether or not a rule names it", "[decide][lan]") {
    NetworkPolicy policy;
    policy.allow_lan = true;
    policy.deny_lan = false;
    auto by_ip = pre_decide(policy, "192.168.1.20", 9100);
    REQUIRE(by_ip.has_value());
    CHECK(by_ip->allowed);
    CHECK(by_ip->reason == Reason::AllowLan);
    CHECK(by_ip->address->to_string() == "192.168.1.20");
    CHECK(pre_decide(policy, "[fd00::7]", 22)->allowed);
    // a name no rule lists must be resolved: it may reach the LAN, nothing else
    CHECK_FALSE(pre_decide(policy, "printer.lan", 631).has_value());
    auto lan_name = decide_one(policy, "printer.lan", 631, {"93.184.216.34", "192.168.1.20"});
    CHECK(lan_name.allowed);
    CHECK(lan_name.reason == Reason::AllowLan);
    CHECK(lan_name.address->to_string() == "192.168.1.20");
    auto public_name = decide_one(policy, "printer.lan", 631, {"93.184.216.34"});
    CHECK_FALSE(public_name.allowed);
    CHECK(public_name.reason == Reason::NotAllowlisted);
    // public addresses still need a rule
    CHECK(pre_decide(policy, "93.184.216.34", 443)->reason == Reason::BareIpNotListed);
}

TEST_CASE("deny-LAN off without allow-LAN: LAN hosts only through a rule", "[decide][lan]") {
    auto policy = policy_with({"nas.example.com:443", "10.0.0.5:22"});
    policy.deny_lan = false;
    CHECK(decide_one(policy, "nas.example.com", 443, {"10.0.0.9"}).allowed);
    CHECK(pre_decide(policy, "10.0.0.5", 22)->allowed);
    CHECK(pre_decide(policy, "10.0.0.5", 23)->reason == Reason::PortNotAllowed);
    CHECK(pre_decide(policy, "10.0.0.6", 22)->reason == Reason::BareIpNotListed);
}

TEST_CASE("a bare IP in any spelling is allowed only if that IP is a rule", "[decide][ip]") {
    auto policy = policy_with({"93.184.216.34:443", "[2606:4700::1111]:443", "example.com"});
    for (const char* spelling :
         {"93.184.216.34", "1572395042", "0x5d.0xb8.0xd8.0x22", "93.184.55330", "0135.0270.0330.042",
          "::ffff:93.184.216.34", "[::ffff:5db8:d822]", "93.184.216.34."}) {
        INFO(spelling);
        auto d = pre_decide(policy, spelling, 443);
        REQUIRE(d.has_value());
        CHECK(d->allowed);
        CHECK(d->reason == Reason::Allowlisted);
    }
    CHECK(pre_decide(policy, "[2606:4700:0:0::1111]", 443)->allowed);
    CHECK(pre_decide(policy, "93.184.216.34", 80)->reason == Reason::PortNotAllowed);
    auto other = pre_decide(policy, "93.184.216.35", 443);
    CHECK(other->reason == Reason::BareIpNotListed);
    CHECK(other->detail == "93.184.216.35 was asked for by address and no allow rule names that address");
    // every spelling of loopback is loopback, never a host name
    for (const char* loopback :
         {"2130706433", "0x7f.1", "0177.0.0.1", "127.1", "[::1]", "::ffff:7f00:1", "127.0.0.1."}) {
        INFO(loopback);
        auto d = pre_decide(policy, loopback, 443);
        REQUIRE(d.has_value());
        CHECK(d->reason == Reason::Loopback);
    }
    // a name rule does not allow the addresses it happens to resolve to
    CHECK(pre_decide(policy, "1.1.1.1", 443)->reason == Reason::BareIpNotListed);
}

TEST_CASE("malformed host names are refused before any lookup", "[decide]") {
    auto policy = policy_with({"example.com"});
    for (const char* bad :
         {"", "exa mple.com", "a..b", "1.2.3.999", "-a.com", "*.example.com", "host/path", "h%41.com"}) {
        INFO(bad);
        auto d = pre_decide(policy, bad, 443);
        REQUIRE(d.has_value());
        CHECK(d->reason == Reason::InvalidHost);
    }
    CHECK(pre_decide(policy, "1.2.3.999", 443)->detail ==
          "\"1.2.3.999\" is not a valid host name: it looks like an IP address but is not a valid one");
}

TEST_CASE("a disabled policy allows everything but the always-refused set", "[decide][disabled]") {
    NetworkPolicy policy;
    policy.enabled = false;
    CHECK_FALSE(pre_decide(policy, "anything.example", 1234).has_value());
    auto d = decide_one(policy, "anything.example", 1234, {"93.184.216.34"});
    CHECK(d.allowed);
    CHECK(d.reason == Reason::PolicyDisabled);
    CHECK(d.detail == "the network policy is disabled (--no-network-policy): egress is unrestricted");
    CHECK(pre_decide(policy, "10.0.0.1", 22)->reason == Reason::PolicyDisabled);
    CHECK(pre_decide(policy, "127.0.0.1", 22)->reason == Reason::Loopback);
    CHECK(decide_one(policy, "x.example", 80, {"198.51.99.1"}, {"198.51.99.1"}).reason == Reason::HostAddress);
}

TEST_CASE("each decision reason has one wire text, the one logs and `policy check` print") {
    const std::pair<Reason, std::string_view> table[] = {
        {Reason::Allowlisted, "allowlisted"},
        {Reason::AllowLan, "allow-lan"},
        {Reason::PolicyDisabled, "policy-disabled"},
        {Reason::NotAllowlisted, "not-allowlisted"},
        {Reason::PortNotAllowed, "port-not-allowed"},
        {Reason::BareIpNotListed, "bare-ip-not-listed"},
        {Reason::Loopback, "loopback"},
        {Reason::Unspecified, "unspecified"},
        {Reason::Multicast, "multicast"},
        {Reason::Broadcast, "broadcast"},
        {Reason::Reserved, "reserved"},
        {Reason::HostAddress, "host-address"},
        {Reason::Lan, "lan"},
        {Reason::NoAddress, "no-address"},
        {Reason::InvalidHost, "invalid-host"},
        {Reason::PolicyUnavailable, "policy-unavailable"},
    };
    for (const auto& [reason, text] : table) CHECK(to_string(reason) == text);
}

TEST_CASE("vet_route refuses what the kernel delivers to this machine or to a bridge of sandboxes", "[decide]") {
    CHECK_FALSE(vet_route(ip("192.0.3.9"), Route{RouteKind::Away, {}}).has_value());

    auto local = vet_route(ip("10.213.0.1"), Route{RouteKind::HostLocal, "lo"});
    REQUIRE(local.has_value());
    CHECK_FALSE(local->allowed);
    CHECK(local->reason == Reason::HostAddress);
    CHECK(local->detail == "10.213.0.1 is one of this machine's own addresses (via lo)");

    auto sandbox = vet_route(ip("10.213.0.18"), Route{RouteKind::SandboxNetwork, "agc-0123456789a"});
    REQUIRE(sandbox.has_value());
    CHECK(sandbox->reason == Reason::SandboxNetwork);
    CHECK(to_string(sandbox->reason) == "sandbox-network");
    CHECK(sandbox->detail ==
          "10.213.0.18 is behind agc-0123456789a, a bridge with only containers and VMs of this machine on it "
          "(another sandbox)");

    auto unknown = vet_route(ip("192.0.3.9"), Route{RouteKind::Unknown, {}});
    REQUIRE(unknown.has_value());
    CHECK(unknown->reason == Reason::HostAddress);
}
