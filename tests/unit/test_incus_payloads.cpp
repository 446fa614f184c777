// Request bodies the Incus provider sends, checked field by field against the
// Incus REST API documentation (https://linuxcontainers.org/incus/docs/main/rest-api-spec/,
// .../reference/instance_options/, .../reference/devices_disk/, .../reference/devices_proxy/,
// .../reference/network_bridge/, .../howto/network_acls/).
#include <catch2/catch.hpp>

#include "provider/incus/naming.hpp"
#include "provider/incus/payloads.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

SandboxSpec sample_spec(Isolation isolation) {
    SandboxSpec spec;
    spec.name = "demo";
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
    auto config = instance_config(spec, "agc-0123456789a", subnet, true);
    auto payload = instance_payload(spec, config, instance_devices(spec, "agc-0123456789a", "default"), true);
    // instance_options: security.secureboot (VM only), limits.cpu, limits.memory
    CHECK(payload["type"] == "virtual-machine");
    CHECK(payload["config"]["security.secureboot"] == "false");
    CHECK(payload["config"]["limits.cpu"] == "2");
    CHECK(payload["config"]["limits.memory"] == "4294967296B");
    CHECK(payload["source"] == Json{{"type", "image"}, {"alias", "agentctl-debian-12"}});
    CHECK(payload["start"] == true);  // extension instance_create_start
    // devices_disk: root disk with pool and size
    CHECK(payload["devices"]["root"] == Json{{"type", "disk"}, {"path", "/"}, {"pool", "default"}, {"size", "21474836480B"}});
    CHECK(payload["devices"]["eth0"] == Json{{"type", "nic"}, {"name", "eth0"}, {"network", "agc-0123456789a"}});
    // VMs share directories over virtiofs: no `shift` (container only).
    CHECK_FALSE(payload["devices"][mount_device_name(0)].contains("shift"));
}

TEST_CASE("container payload: no secure boot key, idmapped mounts", "[payloads]") {
    auto spec = sample_spec(Isolation::Container);
    auto config = instance_config(spec, "agc-x", *parse_ipv4_net("10.213.0.0/28"), true);
    auto payload = instance_payload(spec, config, instance_devices(spec, "agc-x", "default"), false);
    CHECK(payload["type"] == "container");
    CHECK_FALSE(payload["config"].contains("security.secureboot"));
    CHECK(payload["start"] == false);
    const auto& rw = payload["devices"][mount_device_name(0)];
    const auto& ro = payload["devices"][mount_device_name(1)];
    CHECK(rw == Json{{"type", "disk"}, {"source", "/home/u/work"}, {"path", "/workspace"}, {"shift", "true"}});
    CHECK(ro["readonly"] == "true");
    CHECK(ro["shift"] == "true");
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
    auto config = instance_config(spec, "agc-x", *parse_ipv4_net("10.213.0.32/28"), true);
    CHECK(config.at(std::string(key::k_managed)) == "true");
    CHECK(config.at(std::string(key::k_user)) == "dev");
    CHECK(config.at(std::string(key::k_isolation)) == "container");
    CHECK(config.at(std::string(key::k_image)) == "agentctl-debian-12");
    CHECK(Json::parse(config.at(std::string(key::k_profiles))) == Json({"default", "strict"}));
    CHECK(config.at(std::string(key::k_agent)) == "claude");
    CHECK(config.at(std::string(key::k_agent_installed)) == "false");
    CHECK(config.at(std::string(key::k_subnet)) == "10.213.0.33/28");  // the bridge address
    CHECK(config.at(std::string(key::k_acl)) == "agentctl-demo");
    auto mounts = parse_mounts_record(config.at(std::string(key::k_mounts)));
    CHECK(mounts == spec.mounts);
    auto widened = Json::parse(config.at(std::string(key::k_widenings)));
    CHECK(widened.size() == 2);  // the writable mount and container isolation
    auto network = policy::from_policy_file(Json::parse(config.at(std::string(key::k_network))));
    CHECK(network.deny_lan);
}

TEST_CASE("bridge payload: own subnet, NAT on, ACL with reject defaults", "[payloads]") {
    auto payload = network_payload("demo", "agc-0123456789a", *parse_ipv4_net("10.213.0.16/28"), "agentctl-demo");
    CHECK(payload["type"] == "bridge");
    CHECK(payload["config"]["ipv4.address"] == "10.213.0.17/28");
    CHECK(payload["config"]["ipv4.nat"] == "true");
    CHECK(payload["config"]["ipv6.address"] == "none");
    CHECK(payload["config"]["security.acls"] == "agentctl-demo");
    CHECK(payload["config"]["security.acls.default.egress.action"] == "reject");
    CHECK(payload["config"]["security.acls.default.ingress.action"] == "reject");
    CHECK(payload["config"][std::string(key::k_sandbox)] == "demo");

    auto open = network_payload("demo", "agc-0123456789a", *parse_ipv4_net("10.213.0.16/28"), "");
    CHECK_FALSE(open["config"].contains("security.acls"));
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
}
