// Request bodies the Incus provider sends, checked field by field against the
// Incus REST API documentation (https://linuxcontainers.org/incus/docs/main/rest-api-spec/,
// .../reference/instance_options/, .../reference/devices_disk/, .../reference/devices_proxy/,
// .../reference/network_bridge/, .../howto/network_acls/).
#include <catch2/catch.hpp>

#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/client/payloads.hpp"
#include "provider/incus/lifecycle/sandbox_record.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

SandboxSpec sample_spec(Isolation isolation) {
    SandboxSpec spec;
    spec.name = "tbox";
    spec.image = "agentctl-debian-12";
    spec.profiles = {"default", "strict"};
    spec.isolation = isolation;
    spec.resources = {2, 4ULL << 30, 20ULL << 30};
    spec.mounts = {{"/home/u/work", "/workspace", true, "--mount"}, {"/home/u/ref", "/ref", false, "profile default"}};
    spec.ports = {{"127.0.0.1", 8080, 80, "tcp"}};
    spec.packages = {"git"};
    return spec;
}

}  // namespace

TEST_CASE("VM instance payload: type, secure boot off, limits, root size", "[payloads]") {
    auto spec = sample_spec(Isolation::Vm);
    auto subnet = *parse_ipv4_net("10.213.0.16/28");
    auto config = instance_config(spec, "agc-0123456789a", subnet, true, IdentityMap{1000, 1000, 1000, 1000});
    auto payload = instance_payload(spec, config, instance_devices(spec, "agc-0123456789a", "default"), true);
    // instance_options: security.secureboot (VM only), limits.cpu, limits.memory
    CHECK(payload["type"] == "virtual-machine");
    CHECK(payload["config"]["security.secureboot"] == "false");
    CHECK(payload["config"]["limits.cpu"] == "2");
    CHECK(payload["config"]["limits.memory"] == "4294967296B");
    CHECK(payload["source"] == Json{{"type", "image"}, {"alias", "agentctl-debian-12"}});
    CHECK(payload["start"] == true);  // extension instance_create_start
    // devices_disk: root disk with pool and size
    CHECK(payload["devices"]["root"] ==
          Json{{"type", "disk"}, {"path", "/"}, {"pool", "default"}, {"size", "21474836480B"}});
    CHECK(payload["devices"]["eth0"] == Json{{"type", "nic"}, {"name", "eth0"}, {"network", "agc-0123456789a"}});
    // VMs share directories over virtiofs only, where virtiofsd enforces
    // raw.idmap (maps the owner, forbids every other guest id); never `shift`.
    for (std::size_t i = 0; i < 2; ++i) {
        const auto& disk = payload["devices"][mount_device_name(i)];
        CHECK(disk["io.bus"] == "virtiofs");
        CHECK_FALSE(disk.contains("shift"));
    }
    CHECK(payload["config"]["raw.idmap"] == "uid 1000 1000\ngid 1000 1000");
    CHECK(payload["config"]["security.guestapi"] == "false");
    // incusd never starts a sandbox on its own, at boot or otherwise: only agentctl start.
    CHECK(payload["config"]["boot.autostart"] == "false");
    // Container-only keys (instance options): Incus refuses them on VMs.
    CHECK_FALSE(payload["config"].contains("security.idmap.isolated"));
    CHECK_FALSE(payload["config"].contains("limits.processes"));
}

TEST_CASE("container payload: own uid range, only the owner mapped, no shifted mounts", "[payloads]") {
    auto spec = sample_spec(Isolation::Container);
    auto config =
        instance_config(spec, "agc-x", *parse_ipv4_net("10.213.0.0/28"), true, IdentityMap{1000, 1001, 1500, 1500});
    auto payload = instance_payload(spec, config, instance_devices(spec, "agc-x", "default"), false);
    CHECK(payload["type"] == "container");
    CHECK_FALSE(payload["config"].contains("security.secureboot"));
    CHECK(payload["start"] == false);
    const auto& rw = payload["devices"][mount_device_name(0)];
    const auto& ro = payload["devices"][mount_device_name(1)];
    // A shifted mount would make root inside root on these host files.
    CHECK(rw == Json{{"type", "disk"}, {"source", "/home/u/work"}, {"path", "/workspace"}});
    CHECK(ro == Json{{"type", "disk"}, {"source", "/home/u/ref"}, {"path", "/ref"}, {"readonly", "true"}});
    CHECK(payload["config"]["security.idmap.isolated"] == "true");
    CHECK(payload["config"]["raw.idmap"] == "uid 1000 1500\ngid 1001 1500");
    CHECK(payload["config"]["security.guestapi"] == "false");
    CHECK(payload["config"]["limits.processes"] == std::to_string(k_default_processes));
    spec.resources.processes = 64;
    CHECK(instance_config(spec, "agc-x", *parse_ipv4_net("10.213.0.0/28"), true, std::nullopt).at("limits.processes") ==
          "64");
}

TEST_CASE("identity map: the one owner of the writable mounts, never root", "[payloads]") {
    CHECK_FALSE(plan_identity_map({}, 1500));
    auto map = plan_identity_map({{"/w/a", 1000, 1000}, {"/w/b", 1000, 1000}}, 1000);
    REQUIRE(map);
    CHECK(raw_idmap_value(*map) == "uid 1000 1000\ngid 1000 1000");
    // Root-owned writable mounts are refused: mapping host root is what
    // made a setuid-root file on the host possible.
    CHECK_THROWS_WITH(plan_identity_map({{"/srv/x", 0, 0}}, 1500), Catch::Contains("/srv/x belongs to root"));
    CHECK_THROWS_WITH(plan_identity_map({{"/w/a", 1000, 1000}, {"/w/b", 1001, 1001}}, 1000),
                      Catch::Contains("/w/b belongs to 1001:1001 but /w/a to 1000:1000"));
    CHECK(guest_uid_for({{"/w/a", 1000, 1000}}) == 1000);
    CHECK(guest_uid_for({{"/w/a", 70000, 70000}}) == k_default_guest_uid);
    CHECK(guest_uid_for({}) == k_default_guest_uid);
}

TEST_CASE("subordinate id files: which host ids root may map", "[payloads]") {
    const std::string text = "root:1000000:1000000000\nroot:1000:1\nalice:100000:65536\n0:2000:10\n";
    CHECK(subordinate_ids_allow(text, 1000));
    CHECK(subordinate_ids_allow(text, 2009));
    CHECK_FALSE(subordinate_ids_allow(text, 2010));
    CHECK_FALSE(subordinate_ids_allow(text, 1001));
    CHECK_FALSE(subordinate_ids_allow(text, 100000));  // alice's range, not root's
    CHECK(subordinate_ids_allow(text, 1500000));
    CHECK_FALSE(subordinate_ids_allow("garbage\nroot:x:y\n", 1000));
}

TEST_CASE("published ports are proxy devices on the requested host address", "[payloads]") {
    auto devices = port_devices({{"127.0.0.1", 8080, 80, "tcp"}, {"::1", 5353, 53, "udp"}});
    CHECK(devices[port_device_name("tcp", 8080)] ==
          Json{{"type", "proxy"}, {"listen", "tcp:127.0.0.1:8080"}, {"connect", "tcp:127.0.0.1:80"}});
    CHECK(devices[port_device_name("udp", 5353)]["listen"] == "udp:[::1]:5353");
}

TEST_CASE("instance config records everything status needs", "[payloads]") {
    auto spec = sample_spec(Isolation::Container);
    spec.agent = "claude";
    spec.user = "dev";
    auto config = instance_config(spec, "agc-x", *parse_ipv4_net("10.213.0.32/28"), true, std::nullopt);
    CHECK(config.at(std::string(key::k_managed)) == "true");
    CHECK(config.at(std::string(key::k_user)) == "dev");
    CHECK(config.at(std::string(key::k_isolation)) == "container");
    CHECK(config.at(std::string(key::k_image)) == "agentctl-debian-12");
    CHECK(Json::parse(config.at(std::string(key::k_profiles))) == Json({"default", "strict"}));
    CHECK(config.at(std::string(key::k_agent)) == "claude");
    CHECK(config.at(std::string(key::k_agent_installed)) == "false");
    CHECK(config.at(std::string(key::k_subnet)) == "10.213.0.33/28");  // the bridge address
    CHECK(config.at(std::string(key::k_acl)) == "agentctl-tbox");
    const auto record = read_sandbox_record(
        parse_instance(Json{{"name", "tbox"}, {"type", "container"}, {"status", "Stopped"}, {"config", config}}));
    CHECK(record.mounts == spec.mounts);
    auto widened = Json::parse(config.at(std::string(key::k_widenings)));
    CHECK(widened.size() == 2);  // the writable mount and container isolation
    CHECK_FALSE(config.contains("raw.idmap"));
    CHECK(record.ports == spec.ports);
    auto network = policy::from_policy_file(Json::parse(config.at(std::string(key::k_network))));
    CHECK(network.deny_lan);
}

TEST_CASE("bridge payload: own subnet, NAT on, ACL with reject defaults", "[payloads]") {
    auto payload = network_payload("tbox", "agc-0123456789a", *parse_ipv4_net("10.213.0.16/28"), "agentctl-tbox",
                                   BridgeResolver::Incus);
    CHECK(payload["type"] == "bridge");
    CHECK(payload["config"]["ipv4.address"] == "10.213.0.17/28");
    CHECK(payload["config"]["ipv4.nat"] == "true");
    CHECK(payload["config"]["ipv6.address"] == "none");
    CHECK(payload["config"]["security.acls"] == "agentctl-tbox");
    CHECK(payload["config"]["security.acls.default.egress.action"] == "reject");
    CHECK(payload["config"]["security.acls.default.ingress.action"] == "reject");
    CHECK(payload["config"][std::string(key::k_sandbox)] == "tbox");

    CHECK(payload["config"]["ipv4.dhcp"] == "true");

    auto open =
        network_payload("tbox", "agc-0123456789a", *parse_ipv4_net("10.213.0.16/28"), "", BridgeResolver::Incus);
    CHECK_FALSE(open["config"].contains("security.acls"));
}

TEST_CASE("bridge payload: agentctl's own resolver turns Incus's DHCP and DNS off", "[payloads]") {
    auto payload = network_payload("tbox", "agc-0123456789a", *parse_ipv4_net("10.213.0.16/28"), "agentctl-tbox",
                                   BridgeResolver::Host);
    CHECK(payload["config"]["ipv4.dhcp"] == "false");
    CHECK(payload["config"]["dns.mode"] == "none");
    CHECK_FALSE(payload["config"].contains("raw.dnsmasq"));
}

TEST_CASE("exec payload: recorded output, no websockets, sandbox user", "[payloads]") {
    GuestUser user{"agent", 1500, 1500, "/home/agent", "/bin/bash"};
    auto payload = exec_payload({"id", "-u"}, {{"FOO", "bar"}}, &user);
    CHECK(payload["command"] == Json({"id", "-u"}));
    CHECK(payload["wait-for-websocket"] == false);
    CHECK(payload["record-output"] == true);
    CHECK(payload["interactive"] == false);
    CHECK(payload["user"] == 1500);
    CHECK(payload["group"] == 1500);
    CHECK(payload["cwd"] == "/home/agent");
    CHECK(payload["environment"]["HOME"] == "/home/agent");
    CHECK(payload["environment"]["FOO"] == "bar");
    // Agents install under ~/.local/bin (or npm's prefix): they run by name.
    CHECK_THAT(payload["environment"]["PATH"].get<std::string>(),
               Catch::StartsWith("/home/agent/.local/bin:/home/agent/.npm-global/bin:"));
    CHECK(payload["environment"]["NPM_CONFIG_PREFIX"] == "/home/agent/.npm-global");

    auto root = exec_payload({"true"}, {}, nullptr);
    CHECK_FALSE(root.contains("user"));
    CHECK(root["environment"]["HOME"] == "/root");
}

TEST_CASE("state, image pull and publish payloads", "[payloads]") {
    CHECK(state_payload("stop", true, -1) == Json{{"action", "stop"}, {"force", true}});
    CHECK(state_payload("stop", false, 30) == Json{{"action", "stop"}, {"force", false}, {"timeout", 30}});
    auto pull = image_pull_payload("https://images.example", "debian/12");
    CHECK(pull["source"]["mode"] == "pull");
    CHECK(pull["source"]["protocol"] == "simplestreams");
    CHECK(pull["source"]["alias"] == "debian/12");
    CHECK(pull["aliases"][0]["name"] == "debian/12");
    auto publish = image_publish_payload("build-1", "my-image");
    CHECK(publish["source"] == Json{{"type", "instance"}, {"name", "build-1"}});
    CHECK(publish["aliases"][0]["name"] == "my-image");
    CHECK(publish["properties"] == Json{{"description", "agentctl image my-image"}});
    // What the image records of itself goes with it.
    CHECK(image_publish_payload("build-1", "my-image",
                                Json{{"agentctl.passwd", "root:x:0:0::/root:/bin/sh\n"}})["properties"] ==
          Json{{"description", "agentctl image my-image"}, {"agentctl.passwd", "root:x:0:0::/root:/bin/sh\n"}});
}
