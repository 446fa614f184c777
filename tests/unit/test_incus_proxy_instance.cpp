// The companion instance of a sandbox's egress proxy (instance placement):
// its Incus payload (https://linuxcontainers.org/incus/docs/main/reference/instance_options/,
// .../devices_nic/), the bundle of agentctl's binary from `ldd`'s output
// (ld.so(8): "ld.so --library-path PATH PROGRAM"), its systemd unit and setup
// script, and where `auto` puts the proxy.
#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "provider/common/probes.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/guest/guest_proxy_scripts.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/network/proxy_instance.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

EgressSite site() {
    return EgressSite{"tbox", "agc-0123456789a", *parse_ipv4_net("10.9.0.1/28"), "agentctl-debian-12", {}};
}

// `ldd build/test/src/agentctl` on Debian 12 (a sanitizer build).
constexpr const char* k_ldd = R"(	linux-vdso.so.1 (0x00007ffd1a5f2000)
	libasan.so.8 => /lib/x86_64-linux-gnu/libasan.so.8 (0x00007f32b9e00000)
	libfmt.so.9 => /lib/x86_64-linux-gnu/libfmt.so.9 (0x00007f32c7e7f000)
	libstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f32b9a00000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f32b9c1e000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f32c7f8c000)
)";

}  // namespace

TEST_CASE("placement: auto is the host when the server is this machine, else the instance", "[proxy-instance]") {
    CHECK(choose_proxy_placement("auto", true) == ProxyPlacement::Host);
    CHECK(choose_proxy_placement("", true) == ProxyPlacement::Host);
    CHECK(choose_proxy_placement("auto", false) == ProxyPlacement::Instance);
    CHECK(choose_proxy_placement("instance", true) == ProxyPlacement::Instance);
    // The host placement needs the sandbox's bridge on this machine.
    CHECK_THROWS_WITH(choose_proxy_placement("host", false),
                      Catch::Contains("incus.proxyPlacement=host") && Catch::Contains("not this machine"));
    CHECK_THROWS_WITH(choose_proxy_placement("remote", true),
                      "setting incus.proxyPlacement: \"remote\" is not auto, host or instance");
    const auto bridge = *parse_ipv4_net("10.9.0.1/28");
    CHECK(proxy_address(ProxyPlacement::Host, bridge).address_text() == "10.9.0.1");
    CHECK(proxy_address(ProxyPlacement::Instance, bridge).to_string() == "10.9.0.3/28");
    CHECK(to_string(ProxyPlacement::Instance) == "instance");
}

TEST_CASE("the companion: a small container of its own on the sandbox's bridge, marked as agentctl's",
          "[proxy-instance]") {
    const auto payload = companion_payload(site(), "default", CompanionLimits{64ULL << 20, 100});
    CHECK(payload["name"] == "tbox-egress");
    CHECK(companion_name("tbox") == "tbox-egress");
    CHECK(payload["type"] == "container");
    CHECK(payload["start"] == true);
    CHECK(payload["source"] == Json{{"type", "image"}, {"alias", "agentctl-debian-12"}});
    CHECK(payload["profiles"] == Json::array());  // nothing from the default profile
    const auto& config = payload["config"];
    CHECK(config["security.idmap.isolated"] == "true");
    CHECK(config["security.guestapi"] == "false");
    CHECK(config["security.privileged"] == "false");
    CHECK(config["limits.cpu"] == "1");
    CHECK(config["limits.memory"] == "256MiB");
    CHECK(config["limits.processes"] == "128");
    CHECK(config["user.agentctl.managed"] == "true");       // the test clean-up and delete find it
    CHECK(config["user.agentctl.role"] == "egress-proxy");  // list does not show it as a sandbox
    CHECK(config["user.agentctl.sandbox"] == "tbox");
    CHECK(config["raw.lxc"] ==
          "lxc.net.0.ipv4.address = 10.9.0.3/28\nlxc.net.0.ipv4.gateway = 10.9.0.1\n"
          "lxc.sysctl.net.ipv6.conf.all.disable_ipv6 = 1\nlxc.sysctl.net.ipv6.conf.default.disable_ipv6 = 1\n"
          "lxc.cgroup.memory.kmem.tcp.limit_in_bytes = 67108864\n");
    // Three devices only: its root disk, its NIC, filtered like the sandbox's,
    // and the server's own routing table, read-only.
    const auto& devices = payload["devices"];
    CHECK(devices.size() == 3);
    CHECK(devices["server-routes"] == Json{{"type", "disk"},
                                           {"source", "/proc/1/net/fib_trie"},
                                           {"path", "/opt/agentctl-server/fib_trie"},
                                           {"readonly", "true"}});
    CHECK(devices["root"] == Json{{"type", "disk"}, {"path", "/"}, {"pool", "default"}});
    CHECK(devices["eth0"]["network"] == "agc-0123456789a");
    CHECK(devices["eth0"]["ipv4.address"] == "10.9.0.3");
    CHECK(devices["eth0"]["security.mac_filtering"] == "true");
    CHECK(devices["eth0"]["security.ipv4_filtering"] == "true");
}

TEST_CASE("the bundle: the binary, the libraries ldd lists and the loader", "[proxy-instance]") {
    const auto bundle = parse_ldd("/usr/bin/agentctl", k_ldd);
    CHECK(bundle.loader == "/lib64/ld-linux-x86-64.so.2");
    CHECK(bundle.libraries ==
          std::vector<std::string>{"/lib/x86_64-linux-gnu/libasan.so.8", "/lib/x86_64-linux-gnu/libfmt.so.9",
                                   "/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libc.so.6"});
    const auto files = bundle_files(bundle);
    CHECK(files.size() == 6);
    CHECK(files.at("/usr/bin/agentctl") == "/opt/agentctl/bin/agentctl");
    CHECK(files.at("/lib64/ld-linux-x86-64.so.2") == "/opt/agentctl/lib/ld-linux-x86-64.so.2");
    CHECK(files.at("/lib/x86_64-linux-gnu/libstdc++.so.6") == "/opt/agentctl/lib/libstdc++.so.6");

    // Run through the bundled loader, with only the bundled libraries.
    const auto command = companion_command(bundle, site(), true, CompanionLimits{64ULL << 20, 100});
    CHECK(command == std::vector<std::string>{"/opt/agentctl/lib/ld-linux-x86-64.so.2",
                                              "--library-path",
                                              "/opt/agentctl/lib",
                                              "/opt/agentctl/bin/agentctl",
                                              "egress-proxy",
                                              "--listen",
                                              "10.9.0.3:3128",
                                              "--policy",
                                              "/etc/agentctl-egress/policy.json",
                                              "--log",
                                              "/var/lib/agentctl-egress/egress.log",
                                              "--resolve-file",
                                              "/etc/agentctl-egress/resolve",
                                              "--sandbox",
                                              "tbox",
                                              "--max-tunnels",
                                              "100",
                                              "--companion",
                                              "--server-routes",
                                              "/opt/agentctl-server/fib_trie"});

    // A static binary goes alone and runs directly.
    const auto alone = parse_ldd("/usr/bin/agentctl", "\tnot a dynamic executable\n");
    CHECK(alone.loader.empty());
    CHECK(alone.libraries.empty());
    CHECK(bundle_files(alone).size() == 1);
    CHECK(companion_command(alone, site(), false, CompanionLimits{}).front() == "/opt/agentctl/bin/agentctl");

    // A library ldd cannot find is named.
    CHECK_THROWS_WITH(parse_ldd("/usr/bin/agentctl", "\tlibfmt.so.9 => not found\n"),
                      "agentctl's binary needs libfmt.so.9, which ldd cannot find");
}

TEST_CASE("the unit: the proxy as nobody, without capabilities, restarted, reloaded by SIGHUP", "[proxy-instance]") {
    const auto unit = companion_unit({"/opt/agentctl/bin/agentctl", "egress-proxy", "--sandbox", "tbox"}, "tbox",
                                     CompanionLimits{64ULL << 20, 100});
    CHECK_THAT(unit, Catch::Contains("\nUser=nobody\nGroup=nogroup\n"));
    CHECK_THAT(unit, Catch::Contains("\nExecStart=/opt/agentctl/bin/agentctl egress-proxy --sandbox tbox\n"));
    CHECK_THAT(unit, Catch::Contains("\nExecReload=/bin/sh -c \"kill -HUP ${MAINPID}\"\n"));
    CHECK_THAT(unit, Catch::Contains("\nRestart=always\n"));
    CHECK_THAT(unit, Catch::Contains("\nStartLimitIntervalSec=0\n"));
    CHECK_THAT(unit, Catch::Contains("\nNoNewPrivileges=yes\nCapabilityBoundingSet=\n"));
    CHECK_THAT(unit, Catch::Contains("\nWorkingDirectory=/var/lib/agentctl-egress\n"));
    CHECK_THAT(unit, Catch::Contains("\nWantedBy=multi-user.target\n"));
    // Its own memory cgroup counts and caps its TCP memory (cgroup v1), as root before it runs.
    CHECK_THAT(unit,
               Catch::Contains("\nExecStartPre=+/bin/sh -c 'g=$$(sed -n \"s/^[0-9]*:memory://p\" /proc/self/cgroup); "
                               "f=/sys/fs/cgroup/memory$$g/memory.kmem.tcp.limit_in_bytes; [ \"$$g\" = / ] || "
                               "[ ! -e \"$$f\" ] || echo 67108864 >\"$$f\"'\n"));
}

TEST_CASE("the setup script: static network, the bridge's resolver, the unit, waited for", "[proxy-instance]") {
    const auto script = companion_setup_script(site(), false);
    CHECK_THAT(script, Catch::Contains("Address=10.9.0.3/28\nGateway=10.9.0.1\nDNS=10.9.0.1\nDHCP=no\n"
                                       "IPv6AcceptRA=no\n"));
    CHECK_THAT(script, Catch::Contains("printf 'nameserver %s\\n' 10.9.0.1 >/etc/resolv.conf"));
    CHECK_THAT(script, Catch::Contains("chown nobody:nogroup /var/lib/agentctl-egress"));
    CHECK_THAT(script, Catch::Contains("changed=0\n"));
    CHECK_THAT(companion_setup_script(site(), true), Catch::Contains("changed=1\n"));
    CHECK_THAT(script, Catch::Contains("systemctl enable agentctl-egress.service"));
    CHECK_THAT(script, Catch::Contains("exec 3<>/dev/tcp/$0/$1' 10.9.0.3 3128"));
    CHECK_THAT(script, Catch::EndsWith("echo agentctl-egress-up\n"));
}

TEST_CASE("sha256sum output", "[proxy-instance]") {
    const std::string a(64, 'a'), b(64, 'b');
    const auto sums =
        parse_sha256sums(a + "  /opt/agentctl/bin/agentctl\n" + b + " */lib/x.so\nsha256sum: y: No such file\n");
    CHECK(sums.size() == 2);
    CHECK(sums.at("/opt/agentctl/bin/agentctl") == a);
    CHECK(sums.at("/lib/x.so") == b);
}

TEST_CASE("probes point at the proxy where it runs; host probes are skipped when the server is elsewhere",
          "[proxy-instance]") {
    ProbeTargets targets;
    targets.gateway = "10.9.0.1";
    targets.proxy = "10.9.0.3";
    targets.proxy_port = 3128;
    const auto script = probe_battery_script(targets, 2);
    CHECK_THAT(script, Catch::Contains("px=10.9.0.3;"));
    CHECK_THAT(script, Catch::Contains("say host-port skipped"));
    const auto results = provider::common::parse_probe_lines(
        "agentctl-probe direct-bypass held refused\nagentctl-probe host-port skipped not this machine\n");
    const auto summary = provider::common::summarise(results);
    CHECK(summary.total == 1);
    CHECK(summary.skipped.size() == 1);
    CHECK_THAT(to_string(provider::common::confinement_line(summary, std::chrono::system_clock::time_point{})),
               Catch::StartsWith("verified (1/1 probes, 1 skipped: host-port, 1970-01-01T00:00:00Z)"));
}

TEST_CASE("the bridge's strangers: whatever Incus has on it besides the sandbox and its companion",
          "[proxy-instance]") {
    const Json alone{{"used_by", {"/1.0/instances/tbox?project=tests", "/1.0/instances/tbox-egress?project=tests"}}};
    CHECK(bridge_strangers(alone, "tbox", "tests").empty());
    CHECK(bridge_strangers(Json::object(), "tbox", "tests").empty());
    // The same names in another project, another instance, a profile that
    // attaches the bridge: all of them could take the companion's address.
    const Json crowded{
        {"used_by",
         {"/1.0/instances/tbox", "/1.0/instances/tbox-egress?project=tests", "/1.0/instances/imp%2Dostor?project=tests",
          "/1.0/profiles/default?project=other", "/1.0/instances/tbox-egress?project=other&target=node1"}}};
    CHECK(bridge_strangers(crowded, "tbox", "tests") ==
          std::vector<std::string>{"instance tbox (project default)", "instance imp-ostor",
                                   "profile default (project other)", "instance tbox-egress (project other)"});
    // The default project is written without ?project=.
    CHECK(
        bridge_strangers(Json{{"used_by", {"/1.0/instances/tbox", "/1.0/instances/tbox-egress"}}}, "tbox", "").empty());
    CHECK(bridge_strangers(Json{{"used_by", {"/1.0/instances/tbox-egress"}}}, "tbox", "default").empty());
}
