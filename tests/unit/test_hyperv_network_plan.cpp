// The network policy as Hyper-V extended port ACLs. Semantics from the
// Add-VMNetworkAdapterExtendedAcl documentation: the entry with the larger
// -Weight is matched first and decides; -Stateful lets replies back in.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "agentctl/error.hpp"
#include "provider/hyperv/plan.hpp"

using namespace agentctl;
using namespace agentctl::provider::hyperv;

namespace {

const Layout& tbox() {
    static const Layout layout = layout_for("tbox", "/x");
    return layout;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
    return std::any_of(lines.begin(), lines.end(), [&](const auto& l) { return l.find(needle) != std::string::npos; });
}

std::string acl(const std::string& rest) { return "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' " + rest; }

policy::AllowRule rule(policy::HostKind kind, std::string host, std::vector<std::uint16_t> ports) {
    return policy::AllowRule{kind, std::move(host), std::move(ports), "--allow"};
}

}  // namespace

TEST_CASE("the default policy: host denied, DNS open, LAN denied, everything else denied", "[hyperv][network]") {
    const auto plan = network_policy_plan(tbox(), policy::NetworkPolicy{});
    const auto& s = plan.scripts;
    REQUIRE(s.size() == 2 + 2 + 8 + 2);
    CHECK(s.front() == acl("-Action Deny -Direction Outbound -RemoteIPAddress 172.30.0.0/16 -Weight 50000"));
    CHECK(s[4] == acl("-Action Deny -Direction Outbound -RemoteIPAddress 10.0.0.0/8 -Weight 40000"));
    CHECK(s[s.size() - 2] == acl("-Action Deny -Direction Outbound -RemoteIPAddress ANY -Weight 1"));
    CHECK(s.back() == acl("-Action Deny -Direction Inbound -RemoteIPAddress ANY -Weight 1"));
    CHECK_FALSE(any_contains(s, "-Action Allow -Direction Outbound -RemoteIPAddress 10.0.0.0/8"));
}

TEST_CASE("allow-LAN opens every LAN range on any port, but never the host", "[hyperv][network]") {
    policy::NetworkPolicy network;
    network.deny_lan = false;
    network.allow_lan = true;
    const auto plan = network_policy_plan(tbox(), network);
    CHECK(any_contains(
        plan.scripts,
        acl("-Action Allow -Direction Outbound -RemoteIPAddress 192.168.0.0/16 -Weight 30002 -Stateful $true")));
    CHECK(
        any_contains(plan.scripts,
                     acl("-Action Allow -Direction Outbound -RemoteIPAddress fc00::/7 -Weight 30005 -Stateful $true")));
    CHECK_FALSE(any_contains(plan.scripts, "-Action Deny -Direction Outbound -RemoteIPAddress 10.0.0.0/8"));
    // The host band (50000) outranks the LAN allows (30000+).
    CHECK(plan.scripts.front() == acl("-Action Deny -Direction Outbound -RemoteIPAddress 172.30.0.0/16 -Weight 50000"));
}

TEST_CASE("no network policy adds no entries and says so", "[hyperv][network]") {
    policy::NetworkPolicy network;
    network.enabled = false;
    network.allow = {rule(policy::HostKind::Name, "example.com", {443})};
    const auto plan = network_policy_plan(tbox(), network);
    CHECK(plan.scripts.empty());
    REQUIRE(plan.notes.size() == 1);
    CHECK(plan.notes.front() == "no network policy: no port ACL entries, so the sandbox's egress is unrestricted");
}

TEST_CASE("DNS: any resolver, named resolvers, or none", "[hyperv][network]") {
    policy::NetworkPolicy named;
    named.dns.servers = {"9.9.9.9", "2620:fe::fe"};
    const auto plan = network_policy_plan(tbox(), named);
    const std::vector<std::string> expected{
        acl("-Action Allow -Direction Outbound -RemoteIPAddress '9.9.9.9' -RemotePort 53 -Protocol UDP -Weight 45000 "
            "-Stateful $true"),
        acl("-Action Allow -Direction Outbound -RemoteIPAddress '9.9.9.9' -RemotePort 53 -Protocol TCP -Weight 45001 "
            "-Stateful $true"),
        acl("-Action Allow -Direction Outbound -RemoteIPAddress '2620:fe::fe' -RemotePort 53 -Protocol UDP -Weight "
            "45002 -Stateful $true"),
        acl("-Action Allow -Direction Outbound -RemoteIPAddress '2620:fe::fe' -RemotePort 53 -Protocol TCP -Weight "
            "45003 -Stateful $true"),
    };
    CHECK(std::vector<std::string>(plan.scripts.begin() + 2, plan.scripts.begin() + 6) == expected);
    CHECK_FALSE(any_contains(plan.scripts, "-RemoteIPAddress ANY -RemotePort 53"));

    policy::NetworkPolicy off;
    off.dns.disabled = true;
    CHECK_FALSE(any_contains(network_policy_plan(tbox(), off).scripts, "-RemotePort 53"));
}

TEST_CASE("allow rules: names resolved in the script, IPs literal, wildcards left out with a note",
          "[hyperv][network]") {
    policy::NetworkPolicy network;
    network.allow = {
        rule(policy::HostKind::Ip, "203.0.113.7", {80, 443}),
        rule(policy::HostKind::Wildcard, "example.com", {443}),
        rule(policy::HostKind::Name, "any-port.example", {}),
        rule(policy::HostKind::Ip, "2001:db8::1", {}),
    };
    const auto plan = network_policy_plan(tbox(), network);
    CHECK(any_contains(
        plan.scripts,
        acl("-Action Allow -Direction Outbound -RemoteIPAddress '203.0.113.7' -RemotePort 80 -Protocol TCP "
            "-Weight 20000 -Stateful $true; ") +
            acl("-Action Allow -Direction Outbound -RemoteIPAddress '203.0.113.7' -RemotePort 443 "
                "-Protocol TCP -Weight 20001 -Stateful $true")));
    // The wildcard's band (20100) is skipped, not reused.
    CHECK_FALSE(any_contains(plan.scripts, "example.com'"));
    CHECK_FALSE(any_contains(plan.scripts, "-Weight 20100"));
    CHECK(any_contains(plan.notes, "allow rule '*.example.com:443' (--allow) is left out"));
    CHECK(any_contains(plan.scripts,
                       "$w = 20200; foreach ($a in (Resolve-DnsName -Name 'any-port.example' -Type A_AAAA -DnsOnly "
                       "-ErrorAction Stop | Where-Object { $_.IPAddress } | Select-Object -ExpandProperty IPAddress "
                       "-First 100)) { " +
                           acl("-Action Allow -Direction Outbound -RemoteIPAddress $a -Protocol TCP -Weight $w "
                               "-Stateful $true; $w++ }")));
    CHECK(any_contains(plan.scripts, acl("-Action Allow -Direction Outbound -RemoteIPAddress '2001:db8::1' -Protocol "
                                         "TCP -Weight 20300 -Stateful $true")));
}

TEST_CASE("a name with several ports resolves at most as many addresses as its band holds", "[hyperv][network]") {
    policy::NetworkPolicy network;
    network.allow = {rule(policy::HostKind::Name, "deb.debian.org", {80, 443, 8080})};
    const auto plan = network_policy_plan(tbox(), network);
    CHECK(any_contains(plan.scripts,
                       "Select-Object -ExpandProperty IPAddress -First 33)) { foreach ($p in '80','443','8080') {"));
}

TEST_CASE("the plan's fixed weights never collide and rank as designed", "[hyperv][network]") {
    SandboxSpec spec;
    spec.name = "tbox";
    spec.image = "base.vhdx";
    spec.mounts = {Mount{"/a", "/a", false, "--mount"}};
    spec.ports = {PortForward{"127.0.0.1", 8080, 80, "tcp"}, PortForward{"127.0.0.1", 8443, 443, "tcp"}};
    spec.network.dns.servers = {"9.9.9.9"};
    for (int i = 0; i < 5; ++i) {
        spec.network.allow.push_back(rule(policy::HostKind::Ip, "198.51.100." + std::to_string(i + 1), {443, 8443}));
    }
    const auto plan = create_plan(spec, tbox());
    const std::regex entry(R"(-Direction (Inbound|Outbound) [^;]*?-Weight (\d+))");
    std::map<std::string, std::set<int>> seen;
    int entries = 0;
    for (const auto& script : plan.scripts) {
        for (auto it = std::sregex_iterator(script.begin(), script.end(), entry); it != std::sregex_iterator(); ++it) {
            const auto direction = (*it)[1].str();
            const int weight = std::stoi((*it)[2].str());
            INFO(direction << " " << weight);
            CHECK(seen[direction].insert(weight).second);
            ++entries;
        }
    }
    CHECK(entries > 20);
    CHECK(*seen["Outbound"].begin() == k_weight_default_deny);
    CHECK(*seen["Inbound"].begin() == k_weight_default_deny);
    CHECK(*seen["Outbound"].rbegin() == k_weight_smb);
    CHECK(*seen["Inbound"].rbegin() == k_weight_port_publish + 1);
}

TEST_CASE("limits of the weight plan are errors, not silent truncation", "[hyperv][network]") {
    policy::NetworkPolicy too_many;
    for (int i = 0; i <= k_max_allow_rules; ++i)
        too_many.allow.push_back(rule(policy::HostKind::Name, "h" + std::to_string(i) + ".example", {}));
    CHECK_THROWS_AS(network_policy_plan(tbox(), too_many), Error);

    policy::NetworkPolicy many_ports;
    std::vector<std::uint16_t> ports;
    for (int p = 1; p <= k_weights_per_allow_rule + 1; ++p) ports.push_back(static_cast<std::uint16_t>(p));
    many_ports.allow = {rule(policy::HostKind::Name, "example.com", ports)};
    CHECK_THROWS_WITH(network_policy_plan(tbox(), many_ports), Catch::Contains("lists 101 ports"));
}

TEST_CASE("replacing a policy in place keeps the sandbox closed while it changes", "[hyperv][network]") {
    const auto plan = replace_network_policy_plan(tbox(), policy::NetworkPolicy{});
    REQUIRE(plan.scripts.size() > 3);
    CHECK(plan.scripts[0] == acl("-Action Deny -Direction Outbound -RemoteIPAddress ANY -Weight 65000"));
    CHECK(plan.scripts[1] ==
          "Get-VMNetworkAdapterExtendedAcl -VMName 'tbox' | Where-Object { $_.Weight -lt 60000 } | "
          "Remove-VMNetworkAdapterExtendedAcl");
    CHECK(plan.scripts.back() == "Remove-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Weight 65000 -Direction Outbound");
    // The new policy sits between the two.
    const auto fresh = network_policy_plan(tbox(), policy::NetworkPolicy{}).scripts;
    CHECK(std::vector<std::string>(plan.scripts.begin() + 2, plan.scripts.end() - 1) == fresh);
}
