// The ACL builder: policy -> Incus ACL egress rules (the proxy, and IP
// literals as policy::pre_decide allows them), the dnsmasq configuration and
// the host firewall table
// (https://linuxcontainers.org/incus/docs/main/howto/network_acls/: rule
// fields action, state, protocol, destination, destination_port, description).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>

#include "agentctl/process.hpp"
#include "core/files.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/network/acl_rules.hpp"
#include "provider/incus/network/host_firewall.hpp"
#include "provider/incus/network/host_user.hpp"
#include "provider/incus/network/host_resolver.hpp"
#include "provider/incus/client/payloads.hpp"
#include "support/provider_context.hpp"
#include "support/recording_runner.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

// nft itself accepts each script (a dry run), where nft can run.
void check_nft_accepts(const std::vector<std::string>& scripts) {
    if (::geteuid() != 0 || ::access("/usr/sbin/nft", X_OK) != 0) return;
    auto runner = make_real_process_runner();
    for (const auto& text : scripts) {
        ProcessRequest request;
        request.argv = {"nft", "-c", "-f", "-"};
        request.stdin_data = text;
        auto result = runner->run(request);
        CHECK(result.exit_code == 0);
        CHECK(result.err == "");
    }
}

policy::IpAddress ip(const char* text) { return *policy::parse_ip_literal(text); }

bool has_rule(const Json& rules, const std::string& destination, const std::string& protocol,
              const std::string& ports) {
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

AclContext context() { return AclContext{"10.9.0.1", 3128, {}, {}, {}, {}}; }

policy::NetworkPolicy with(std::initializer_list<const char*> entries) {
    policy::NetworkPolicy network;
    for (const auto* e : entries) network.allow.push_back(policy::parse_allow_entry(e, "--allow"));
    return network;
}

}  // namespace

TEST_CASE("default policy: only the egress proxy, no DNS rule anywhere", "[acl]") {
    auto rules = build_acl_rules(policy::NetworkPolicy{}, context());
    REQUIRE(rules.egress.size() == 1);
    CHECK(has_rule(rules.egress, "10.9.0.1/32", "tcp", "3128"));
    for (const auto& r : rules.egress) CHECK(r.value("destination_port", "") != "53");
    CHECK(rules.notes.empty());
}

TEST_CASE("names and wildcards go through the proxy: no rule, no note", "[acl]") {
    auto rules = build_acl_rules(with({"api.example.com:443", "*.example.org"}), context());
    CHECK(rules.egress.size() == 1);
    CHECK(rules.notes.empty());
    CHECK(rules.direct.empty());
}

TEST_CASE("IP literals become direct rules as pre_decide allows them", "[acl]") {
    auto network = with({"93.184.216.34:443,80", "8.8.8.8"});
    // The parser already refuses loopback; the decision is the second guard.
    network.allow.push_back(policy::AllowRule{policy::HostKind::Ip, "127.0.0.1", {80}, "test"});
    network.allow.push_back(policy::parse_allow_entry("10.1.2.3:22", "--allow"));
    auto rules = build_acl_rules(network, context());
    CHECK(has_rule(rules.egress, "93.184.216.34/32", "tcp", "80,443"));
    CHECK(has_rule(rules.egress, "8.8.8.8/32", "tcp", ""));
    CHECK_FALSE(has_rule(rules.egress, "127.0.0.1/32", "tcp", "80"));
    CHECK_FALSE(has_rule(rules.egress, "10.1.2.3/32", "tcp", "22"));  // deny-LAN
    REQUIRE(rules.notes.size() == 2);
    CHECK_THAT(rules.notes[0], Catch::Contains("loopback"));
    CHECK_THAT(rules.notes[1], Catch::Contains("deny-LAN"));
    REQUIRE(rules.direct.size() == 2);
    CHECK(rules.direct[0].address == "93.184.216.34");
    CHECK(rules.direct[0].ports == "80,443");
    CHECK(rules.direct[1].address == "8.8.8.8");
    CHECK(rules.direct[1].ports.empty());
}

TEST_CASE("the ACL and policy check agree: denyLAN false admits an allowlisted LAN address", "[acl]") {
    auto network = with({"10.1.2.3:22"});
    network.deny_lan = false;
    auto rules = build_acl_rules(network, context());
    CHECK(has_rule(rules.egress, "10.1.2.3/32", "tcp", "22"));
    auto decision = policy::pre_decide(network, "10.1.2.3", 22);
    REQUIRE(decision);
    CHECK(decision->allowed);
}

TEST_CASE("allow-LAN opens no range directly, and never the host's own addresses", "[acl]") {
    auto network = with({"192.168.1.10:80"});
    network.allow_lan = true;
    auto ctx = context();
    ctx.host_own.push_back(ip("192.168.1.10"));
    auto rules = build_acl_rules(network, ctx);
    REQUIRE(rules.egress.size() == 1);  // the proxy only
    REQUIRE(rules.notes.size() == 1);
    CHECK_THAT(rules.notes[0], Catch::Contains("own addresses"));
}

TEST_CASE("duplicate destinations collapse", "[acl]") {
    auto rules = build_acl_rules(with({"8.8.8.8:443", "8.8.8.8:443"}), context());
    CHECK(rules.egress.size() == 2);
}

TEST_CASE("dnsmasq answers allowlisted names only, from the chosen upstreams", "[acl]") {
    auto network = with({"api.example.com:443", "*.example.org", "8.8.8.8", "api.example.com:80"});
    const std::vector<std::string> upstreams{"10.255.255.53", "2001:db8::53"};
    CHECK(dnsmasq_config(dns_servers(network, upstreams)) ==
          "no-resolv\nno-ident\n"
          "server=/api.example.com/10.255.255.53\nserver=/api.example.com/2001:db8::53\n"
          "server=/*.example.org/10.255.255.53\nserver=/*.example.org/2001:db8::53\n"
          "address=/#/\n");
    network.dns.disabled = true;
    CHECK(dnsmasq_config(dns_servers(network, upstreams)) == "no-resolv\nno-ident\naddress=/#/\n");
    CHECK(dnsmasq_config(dns_servers(policy::NetworkPolicy{}, upstreams)) == "no-resolv\nno-ident\naddress=/#/\n");
}

TEST_CASE("the resolver's servers: allowlisted domains only, every name when the policy is off", "[acl]") {
    using Servers = std::vector<std::string>;
    auto network = with({"api.example.com:443", "*.example.org", "8.8.8.8"});
    const std::vector<std::string> upstreams{"10.255.255.53"};
    CHECK(dns_servers(network, upstreams) == Servers{"/api.example.com/10.255.255.53", "/*.example.org/10.255.255.53"});
    // An exact rule for the apex as well: /DOMAIN/ covers both.
    CHECK(dns_servers(with({"*.example.org", "example.org:443"}), upstreams) == Servers{"/example.org/10.255.255.53"});
    network.dns.disabled = true;
    CHECK(dns_servers(network, upstreams).empty());
    network.enabled = false;
    CHECK(dns_servers(network, upstreams) == Servers{"10.255.255.53"});
}

TEST_CASE("agentctl's resolver: dnsmasq on the bridge only, unprivileged, one address leased", "[acl]") {
    ResolverSpec spec{"agc-0123456789a",
                      "10.9.0.1",
                      "10.9.0.2",
                      "255.255.255.240",
                      {"/api.example.com/10.255.255.53", "/example.org/10.255.255.53"},
                      true};
    const auto argv = resolver_arguments("/usr/sbin/dnsmasq", spec);
    auto has = [&argv](const std::string& arg) { return std::find(argv.begin(), argv.end(), arg) != argv.end(); };
    CHECK(argv.front() == "/usr/sbin/dnsmasq");
    for (const auto* arg :
         {"--keep-in-foreground", "--conf-file=/dev/null", "--no-hosts", "--no-resolv", "--interface=agc-0123456789a",
          "--except-interface=lo", "--bind-dynamic", "--user=", "--group=", "--leasefile-ro",
          "--dhcp-range=10.9.0.2,10.9.0.2,255.255.255.240,infinite", "--dhcp-option=option:router,10.9.0.1",
          "--dhcp-option=option:dns-server,10.9.0.1", "--no-ident", "--server=/api.example.com/10.255.255.53",
          "--server=/example.org/10.255.255.53", "--address=/#/"}) {
        CAPTURE(arg);
        CHECK(has(arg));
    }
    // Started as the sandbox's uid, it writes no file (no pid file, no lease database).
    for (const auto& arg : argv) {
        CHECK_FALSE(arg.starts_with("--pid-file"));
        CHECK_FALSE(arg.starts_with("--dhcp-leasefile"));
    }
    // No policy: every name forwarded, nothing answered locally.
    spec.servers = {"10.255.255.53"};
    spec.allowlist_only = false;
    const auto open = resolver_arguments("/usr/sbin/dnsmasq", spec);
    CHECK(std::find(open.begin(), open.end(), "--address=/#/") == open.end());
    CHECK(std::find(open.begin(), open.end(), "--server=10.255.255.53") != open.end());
}

TEST_CASE("DNS upstreams: the policy's servers, else the host's resolv.conf", "[acl]") {
    policy::NetworkPolicy network;
    const std::string resolv =
        "# c\nsearch x\nnameserver 10.255.255.53\nnameserver fe80::1%eth0\nnameserver 1.1.1.1\n"
        "nameserver 1.1.1.1\n";
    CHECK(dns_upstreams(network, resolv) == std::vector<std::string>{"10.255.255.53", "1.1.1.1"});
    network.dns.servers = {"9.9.9.9", "not-an-ip"};
    CHECK(dns_upstreams(network, resolv) == std::vector<std::string>{"9.9.9.9"});
}

TEST_CASE("the host firewall table: rejects all but DHCP, DNS and the proxy on the bridge address", "[acl]") {
    const auto script =
        firewall_script(FirewallSpec{"agc-0123456789a",
                                     "10.9.0.1",
                                     3128,
                                     host_uid_set(),
                                     {{"203.0.113.7", "80,443"}, {"198.51.100.1", ""}, {"2001:db8::1", ""}},
                                     {},
                                     {}});
    CHECK(firewall_table("agc-0123456789a") == "agentctl-agc-0123456789a");
    CHECK_THAT(script, Catch::StartsWith("table inet agentctl-agc-0123456789a {}\ndelete table inet "
                                         "agentctl-agc-0123456789a\n"));
    CHECK_THAT(script, Catch::Contains("type filter hook input priority filter - 5; policy accept;"));
    CHECK_THAT(script, Catch::Contains("iifname \"agc-0123456789a\" jump from_sandbox"));
    CHECK_THAT(script, Catch::Contains("ip daddr 10.9.0.1 tcp dport { 53, 3128 } accept"));
    CHECK_THAT(script, Catch::Contains("iifname \"agc-0123456789a\" oifname \"agc-*\" reject"));
    // Every sandbox's host uid, and nobody (what sandboxes made before ran as).
    CHECK(host_uid_set() == "{ 65534, 2000000000-2000065535 }");
    CHECK_THAT(script, Catch::Contains("meta skuid { 65534, 2000000000-2000065535 } ct state new reject"));
    CHECK_THAT(script, Catch::Contains("meta skuid { 65534, 2000000000-2000065535 } udp sport 67 accept\n    "
                                       "oifname \"agc-0123456789a\" meta skuid { 65534, 2000000000-2000065535 } ct "
                                       "state new reject"));
    // What the ACL admits directly passes on to it; every other new TCP connection gets a reset.
    CHECK_THAT(script, Catch::Contains("ip daddr 203.0.113.7 tcp dport { 80,443 } return\n"));
    CHECK_THAT(script, Catch::Contains("ip daddr 198.51.100.1 tcp dport 1-65535 return\n"));
    CHECK_THAT(script, !Catch::Contains("2001:db8::1"));
    CHECK_THAT(script, Catch::Contains("meta l4proto tcp ct state new reject with tcp reset"));
    check_nft_accepts({script, firewall_delete_script("agc-0123456789a")});
}

TEST_CASE("nft changes a firewall table holding the host's firewall lock, and a failure says how nft ended",
          "[firewall]") {
    test::RecordingProcessRunner runner;
    auto platform = make_real_host_platform();
    test::LockDir locks;
    std::ostringstream out;
    test::RecordingReporter reporter;
    test::NoMountChecker mounts;
    ProviderContext context{.runner = runner,
                            .platform = *platform,
                            .reporter = reporter,
                            .out = out,
                            .mount_checker = mounts,
                            .host_lock_dir = locks.path()};
    const auto lock = host_firewall_lock_path(locks.path());
    bool held_while_nft_ran = false;
    runner.set_fallback([&](const ProcessRequest& request) {
        REQUIRE(request.argv.front() == "nft");
        held_while_nft_ran = core::FileLock::try_acquire(lock) == nullptr;
        ProcessResult result;
        result.timed_out = true;
        return result;
    });
    auto host = make_local_egress_host(context);
    CHECK_THROWS_WITH(host->remove_firewall("agc-0123456789a"),
                      "nft refused agentctl's firewall table for bridge agc-0123456789a (timed out): ");
    CHECK(held_while_nft_ran);
    CHECK(core::FileLock::try_acquire(lock) != nullptr);  // and let go of it after
}

TEST_CASE("firewall_bridges: the bridges of agentctl's tables, from nft's JSON", "[firewall]") {
    const std::string listing = R"({"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
        {"table": {"family": "inet", "name": "agentctl-agc-0123456789a", "handle": 7}},
        {"table": {"family": "ip", "name": "agentctl-agc-fffffffffff", "handle": 8}},
        {"table": {"family": "inet", "name": "incus", "handle": 9}},
        {"table": {"family": "inet", "name": "mine", "handle": 10}}]})";
    CHECK(firewall_bridges(listing) == std::vector<std::string>{"agc-0123456789a"});
    CHECK(firewall_bridges(R"({"nftables": []})").empty());
    CHECK_THROWS_WITH(firewall_bridges("table inet x {}"), Catch::Contains("nft's JSON"));
}

TEST_CASE("ACL payload", "[acl]") {
    AclRules rules;
    rules.egress.push_back({{"action", "allow"}});
    auto payload = acl_payload("tbox", rules);
    CHECK(payload["name"] == "agentctl-tbox");
    CHECK(payload["ingress"] == Json::array());
    CHECK(payload["config"]["user.agentctl.sandbox"] == "tbox");
}

TEST_CASE("the instance side is the same for containers and VMs: fixed address, filtering, proxy environment",
          "[acl]") {
    const auto subnet = *parse_ipv4_net("10.9.0.0/28");
    for (auto isolation : {Isolation::Container, Isolation::Vm}) {
        SandboxSpec spec;
        spec.name = "tbox";
        spec.image = "agentctl-debian-12";
        spec.isolation = isolation;
        auto config = instance_config(spec, "agc-x", subnet, true, std::nullopt);
        auto devices = instance_devices(spec, "agc-x", "default");
        confine_instance(config, devices, subnet, true, "10.9.0.1", 3128, isolation);
        const auto payload = instance_payload(spec, config, devices, true);
        CHECK(payload["type"] == (isolation == Isolation::Vm ? "virtual-machine" : "container"));
        const auto& nic = payload["devices"]["eth0"];
        CHECK(nic["network"] == "agc-x");
        CHECK(nic["ipv4.address"] == "10.9.0.2");
        CHECK(nic["security.mac_filtering"] == "true");
        CHECK(nic["security.ipv4_filtering"] == "true");
        for (const auto* key : {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"}) {
            CHECK(payload["config"]["environment." + std::string(key)] == "http://10.9.0.1:3128");
        }
        CHECK(payload["config"]["environment.no_proxy"] == "localhost,127.0.0.1,::1");
        if (isolation == Isolation::Container) {
            CHECK(payload["config"]["raw.lxc"] ==
                  "lxc.net.0.ipv4.address = 10.9.0.2/28\nlxc.net.0.ipv4.gateway = 10.9.0.1\n");
        } else {
            CHECK_FALSE(payload["config"].contains("raw.lxc"));  // a VM configures its own network
        }
    }
    // Without a policy: filtering stays, no proxy environment.
    SandboxSpec spec;
    auto config = instance_config(spec, "agc-x", subnet, false, std::nullopt);
    auto devices = instance_devices(spec, "agc-x", "default");
    confine_instance(config, devices, subnet, false, "10.9.0.1", 3128, Isolation::Container);
    CHECK(devices["eth0"]["security.ipv4_filtering"] == "true");
    CHECK(config.count("environment.https_proxy") == 0);
}

TEST_CASE("instance placement: every rule names its source; the companion reaches outside but not the host", "[acl]") {
    auto ctx = context();
    ctx.proxy_instance = "10.9.0.3";
    ctx.sandbox = "10.9.0.2";
    ctx.host_own = {ip("192.0.2.5"), ip("2001:db8::5")};
    ctx.proxy_refused = {"10.213.0.0/16"};
    auto rules = build_acl_rules(with({"api.example.com:443", "8.8.8.8:22"}), ctx);
    REQUIRE(rules.egress.size() == 4);
    // The sandbox: its proxy in the companion, and the IP literal; nothing else.
    CHECK(rules.egress[0] == Json{{"action", "allow"},
                                  {"state", "enabled"},
                                  {"description", "the sandbox's egress proxy (its companion instance)"},
                                  {"source", "10.9.0.2/32"},
                                  {"destination", "10.9.0.3/32"},
                                  {"protocol", "tcp"},
                                  {"destination_port", "3128"}});
    CHECK(rules.egress[1]["source"] == "10.9.0.2/32");
    CHECK(rules.egress[1]["destination"] == "8.8.8.8/32");
    CHECK(rules.egress[1]["destination_port"] == "22");
    // The companion: never the host (bridge address, its IPv4 addresses) or other sandboxes' subnets ...
    CHECK(rules.egress[2] ==
          Json{{"action", "reject"},
               {"state", "enabled"},
               {"description", "the egress proxy instance never reaches the host or other sandboxes"},
               {"source", "10.9.0.3/32"},
               {"destination", "10.9.0.1/32,192.0.2.5/32,10.213.0.0/16"}});
    // ... and any other destination over TCP: the proxy vets every address itself.
    CHECK(rules.egress[3] ==
          Json{{"action", "allow"},
               {"state", "enabled"},
               {"description", "the egress proxy instance: outside destinations (it vets every address itself)"},
               {"source", "10.9.0.3/32"},
               {"protocol", "tcp"}});
    // No rule lets the sandbox reach the bridge's host address or any UDP at all.
    for (const auto& rule : rules.egress) {
        CHECK(rule.value("destination", "") != "10.9.0.1/32");
        CHECK(rule.value("protocol", "tcp") == "tcp");
        CHECK(rule.contains("source"));
    }
    CHECK(rules.direct.size() == 1);
}

TEST_CASE("host placement: rules carry no source (unchanged)", "[acl]") {
    auto rules = build_acl_rules(with({"8.8.8.8:22"}), context());
    for (const auto& rule : rules.egress) CHECK_FALSE(rule.contains("source"));
    CHECK(has_rule(rules.egress, "10.9.0.1/32", "tcp", "3128"));
}

TEST_CASE("the host firewall table with the proxy in a companion instance", "[acl]") {
    FirewallSpec spec{"agc-0123456789a",       "10.9.0.1", 3128,      host_uid_set(),
                      {{"203.0.113.7", "22"}}, "10.9.0.3", "10.9.0.2"};
    const auto script = firewall_script(spec);
    // No proxy port on the host any more: only DNS and DHCP to the bridge address.
    CHECK_THAT(script, Catch::Contains("ip daddr 10.9.0.1 tcp dport 53 accept"));
    CHECK_THAT(script, !Catch::Contains("3128 } accept"));
    // The sandbox's TCP to the companion's proxy port across the bridge (and its answers) pass,
    // before anything refuses traffic into agc-* bridges.
    const auto to_proxy = script.find(
        "iifname \"agc-0123456789a\" oifname \"agc-0123456789a\" ip saddr 10.9.0.2 ip daddr 10.9.0.3 "
        "tcp dport 3128 return");
    const auto answers = script.find(
        "iifname \"agc-0123456789a\" oifname \"agc-0123456789a\" ip saddr 10.9.0.3 ip daddr 10.9.0.2 "
        "tcp sport 3128 return");
    const auto other_bridges = script.find("oifname \"agc-*\" reject");
    REQUIRE(to_proxy != std::string::npos);
    REQUIRE(answers != std::string::npos);
    CHECK(to_proxy < other_bridges);
    CHECK(answers < other_bridges);
    // The companion's new TCP connections go on to the ACL; everyone else's get a reset.
    const auto companion = script.find("iifname \"agc-0123456789a\" ip saddr 10.9.0.3 meta l4proto tcp return");
    const auto reset = script.find("meta l4proto tcp ct state new reject with tcp reset\n  }");
    REQUIRE(companion != std::string::npos);
    CHECK(companion < reset);
    check_nft_accepts({script});
}

TEST_CASE("the sandbox's proxy settings point where the proxy runs", "[acl]") {
    const auto subnet = *parse_ipv4_net("10.9.0.0/28");
    SandboxSpec spec;
    auto config = instance_config(spec, "agc-x", subnet, true, std::nullopt);
    auto devices = instance_devices(spec, "agc-x", "default");
    confine_instance(config, devices, subnet, true, "10.9.0.3", 3128, Isolation::Container);
    CHECK(config["environment.https_proxy"] == "http://10.9.0.3:3128");
}

TEST_CASE("network.dns.disabled: the host firewall refuses the gateway's port 53", "[acl]") {
    FirewallSpec spec{"agc-0123456789a", "10.9.0.1", 3128, host_uid_set(), {}, {}, {}};
    spec.dns = false;
    const auto script = firewall_script(spec);
    CHECK_THAT(script, Catch::Contains("ip daddr 10.9.0.1 tcp dport 3128 accept"));
    CHECK_THAT(script, !Catch::Contains("dport 53"));
    CHECK_THAT(script, Catch::Contains("udp dport 67 accept"));  // DHCP still served
    // With the proxy in a companion too: no TCP port of the gateway is open.
    spec.proxy_instance = "10.9.0.3";
    spec.sandbox = "10.9.0.2";
    const auto companion = firewall_script(spec);
    CHECK_THAT(companion, !Catch::Contains("dport 53"));
    CHECK_THAT(companion, !Catch::Contains("ip daddr 10.9.0.1 tcp dport"));
    check_nft_accepts({script, companion});
}
