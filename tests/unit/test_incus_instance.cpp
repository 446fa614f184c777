// The typed instance, state and snapshot (instance.hpp): Incus's documented
// answers read field by field, and a malformed answer refused with the
// instance and the field.
#include <catch2/catch.hpp>

#include "provider/incus/client/instance.hpp"
#include "support/error_text.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;
using agentctl::test::error_of;
using agentctl::test::k_no_error;

namespace {

// GET /1.0/instances/foo/state as Incus's REST API documents it (InstanceState).
Json documented_state() {
    return Json::parse(R"({
      "cpu": {"usage": 4986019722},
      "disk": {"root": {"usage": 15654}},
      "memory": {"swap_usage": 0, "swap_usage_peak": 0, "usage": 73248768, "usage_peak": 73785344},
      "network": {
        "eth0": {
          "addresses": [
            {"address": "10.0.3.27", "family": "inet", "netmask": "24", "scope": "global"},
            {"address": "fe80::216:3eff:feec:65a8", "family": "inet6", "netmask": "64", "scope": "link"}
          ],
          "counters": {"bytes_received": 33942, "bytes_sent": 30810, "packets_received": 402, "packets_sent": 178},
          "host_name": "vethbbcd39c7",
          "hwaddr": "00:16:3e:ec:65:a8",
          "mtu": 1500,
          "state": "up",
          "type": "broadcast"
        },
        "lo": {
          "addresses": [{"address": "127.0.0.1", "family": "inet", "netmask": "8", "scope": "local"}],
          "host_name": "", "hwaddr": "", "mtu": 65536, "state": "up", "type": "loopback"
        }
      },
      "pid": 7281,
      "processes": 50,
      "status": "Running",
      "status_code": 103
    })");
}

// GET /1.0/instances/foo?recursion=1 as Incus documents it (InstanceFull).
Json documented_instance() {
    auto instance = Json::parse(R"({
      "architecture": "x86_64",
      "config": {"security.nesting": "true", "user.agentctl.managed": "true"},
      "created_at": "2021-03-23T20:00:00-04:00",
      "description": "My test instance",
      "devices": {"root": {"path": "/", "pool": "default", "type": "disk"}},
      "ephemeral": false,
      "expanded_config": {"security.nesting": "true", "user.agentctl.managed": "true", "limits.cpu": "2"},
      "expanded_devices": {
        "eth0": {"name": "eth0", "network": "incusbr0", "type": "nic", "ipv4.address": "10.0.3.27"},
        "root": {"path": "/", "pool": "default", "type": "disk"}
      },
      "last_used_at": "2021-03-23T20:00:00-04:00",
      "location": "server01",
      "name": "foo",
      "profiles": ["default"],
      "project": "default",
      "stateful": false,
      "status": "Running",
      "status_code": 103,
      "type": "container"
    })");
    instance["state"] = documented_state();
    return instance;
}

// `answer` with the member at `path` (a JSON pointer) set to `value`.
Json with(Json answer, const std::string& path, Json value) {
    answer[Json::json_pointer(path)] = std::move(value);
    return answer;
}

}  // namespace

TEST_CASE("incus instance: Incus's documented instance is read field by field", "[incus][instance]") {
    const auto instance = parse_instance(documented_instance());
    CHECK(instance.name == "foo");
    CHECK(instance.type == Isolation::Container);
    CHECK(instance.status == "Running");
    CHECK(instance.status_code == IncusStatus::Running);
    CHECK(instance.running());
    CHECK(instance.project == "default");
    CHECK(instance.location == "server01");
    CHECK(instance.architecture == "x86_64");
    CHECK(instance.created_at == "2021-03-23T20:00:00-04:00");
    CHECK(instance.profiles == std::vector<std::string>{"default"});
    CHECK(instance.config_value("user.agentctl.managed") == "true");
    CHECK(instance.config_value("limits.cpu").empty());  // only in expanded_config
    CHECK(instance.expanded_config.at("limits.cpu") == "2");
    CHECK(instance.devices.at("root").at("pool") == "default");
    CHECK(instance.expanded_devices.at("eth0").at("ipv4.address") == "10.0.3.27");
    REQUIRE(instance.state);
    CHECK(instance.state->pid == 7281);
    CHECK(instance.state->network.at("eth0").addresses.size() == 2);

    // A virtual machine, stopped, without its state (recursion=1 of the list).
    auto vm = documented_instance();
    vm["type"] = "virtual-machine";
    vm["status"] = "Stopped";
    vm.erase("state");
    const auto stopped = parse_instance(vm);
    CHECK(stopped.type == Isolation::Vm);
    CHECK(stopped.status_code == IncusStatus::Stopped);
    CHECK_FALSE(stopped.running());
    CHECK_FALSE(stopped.state);
    // A status Incus has but agentctl does not act on is kept as Incus says it.
    const auto error_status = parse_instance(with(vm, "/status", "Error"));
    CHECK(error_status.status == "Error");
    CHECK(error_status.status_code == IncusStatus::Other);
    // Go sends an empty map as null.
    CHECK(parse_instance(with(vm, "/devices", nullptr)).devices.empty());
}

TEST_CASE("incus instance: Incus's documented state is read field by field", "[incus][instance]") {
    const auto state = parse_instance_state(documented_state(), "foo");
    CHECK(state.status_code == IncusStatus::Running);
    CHECK(state.pid == 7281);
    CHECK(state.processes == 50);
    CHECK(state.memory_usage == 73248768);
    CHECK(state.memory_usage_peak == 73785344);
    const auto& eth0 = state.network.at("eth0");
    CHECK(eth0.hwaddr == "00:16:3e:ec:65:a8");
    CHECK(eth0.host_name == "vethbbcd39c7");
    CHECK(eth0.state == "up");
    CHECK(eth0.type == "broadcast");
    REQUIRE(eth0.addresses.size() == 2);
    CHECK(eth0.addresses[0].family == "inet");
    CHECK(eth0.addresses[0].address == "10.0.3.27");
    CHECK(eth0.addresses[0].netmask == "24");
    CHECK(eth0.addresses[0].scope == "global");
    CHECK(eth0.addresses[1].scope == "link");
    CHECK(state.network.at("lo").type == "loopback");
    // A stopped container: pid -1, no network.
    auto stopped = Json{{"status", "Stopped"}, {"status_code", 102}, {"pid", -1}, {"network", nullptr}};
    const auto none = parse_instance_state(stopped, "foo");
    CHECK(none.pid == 0);
    CHECK(none.network.empty());
    CHECK(none.status_code == IncusStatus::Stopped);
}

TEST_CASE("incus instance: a malformed answer names the instance and the field", "[incus][instance]") {
    const auto instance = documented_instance();
    const std::string prefix = "the Incus server's answer about instance foo is malformed: field ";
    CHECK(error_of([&] { (void)parse_instance(with(instance, "/config/limits.cpu", 2)); }) ==
          prefix + "\"config.limits.cpu\" is not text");
    CHECK(error_of([&] { (void)parse_instance(with(instance, "/type", "vm")); }) ==
          prefix + "\"type\" is \"vm\", neither container nor virtual-machine");
    auto without_status = instance;
    without_status.erase("status");
    CHECK(error_of([&] { (void)parse_instance(without_status); }) == prefix + "\"status\" is missing");
    CHECK(error_of([&] { (void)parse_instance(with(instance, "/devices/root", "disk")); }) ==
          prefix + "\"devices.root\" is not an object");
    CHECK(error_of([&] { (void)parse_instance(with(instance, "/profiles", "default")); }) ==
          prefix + "\"profiles\" is not a list");
    CHECK(error_of([&] { (void)parse_instance(with(instance, "/state/pid", "7281")); }) ==
          prefix + "\"state.pid\" is not a whole number");
    CHECK(error_of([&] { (void)parse_instance(with(instance, "/state/network/eth0/addresses/1", "fe80::1")); }) ==
          prefix + "\"state.network.eth0.addresses[1]\" is not an object");
    CHECK(error_of([&] {
              (void)parse_instance(Json{{"type", "container"}, {"status", "Running"}});
          }) == "the Incus server's answer about an instance without a name is malformed: field \"name\" is missing");

    CHECK(error_of([&] {
              (void)parse_instance_state(with(documented_state(), "/network/eth0/addresses/0/scope", 1), "foo");
          }) ==
          "the Incus server's answer about the state of instance foo is malformed: field "
          "\"network.eth0.addresses[0].scope\" is not "
          "text");
    CHECK(error_of([&] { (void)parse_instance_state(Json::array(), "foo"); }) ==
          "the Incus server's answer about the state of instance foo is malformed: field \"(the answer)\" is not an "
          "object");
    CHECK(error_of([&] { (void)parse_instance(documented_instance()); }) == k_no_error);
}

TEST_CASE("incus instance: a snapshot and the body of a PUT", "[incus][instance]") {
    const auto snapshot = parse_instance_snapshot(
        Json::parse(R"({"name": "foo/snap0", "created_at": "2021-03-23T20:00:00-04:00", "stateful": false,
                        "config": {"user.agentctl.mounts": "[]"}, "devices": {}, "expires_at": null})"),
        "foo");
    CHECK(snapshot.name == "foo/snap0");
    CHECK(snapshot.config.at("user.agentctl.mounts") == "[]");
    CHECK(error_of([&] {
              (void)parse_instance_snapshot(Json{{"name", "foo/snap0"}, {"stateful", "no"}}, "foo");
          }) ==
          "the Incus server's answer about a snapshot of instance foo is malformed: field \"stateful\" is not true or "
          "false");

    // PUT takes the writable fields (api.InstancePut) only.
    const auto body = instance_put_body(parse_instance(documented_instance()));
    CHECK(body == Json::parse(R"({
      "architecture": "x86_64",
      "config": {"security.nesting": "true", "user.agentctl.managed": "true"},
      "description": "My test instance",
      "devices": {"root": {"path": "/", "pool": "default", "type": "disk"}},
      "ephemeral": false,
      "profiles": ["default"],
      "stateful": false
    })"));
}
