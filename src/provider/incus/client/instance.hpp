// An Incus instance, its state and its snapshots, typed as Incus's own Go
// client has them (shared/api: api.Instance, api.InstanceState,
// api.InstanceSnapshot), with the fields agentctl reads.
//
// Each answer is parsed once, when the Api receives it, and strictly: a field
// of the wrong kind (a config value that is not text, an address that is not an
// object, a type Incus does not have) throws agentctl::Error naming the
// instance and the field. A field Incus leaves out (or sends as null, as Go
// does for an empty map) keeps its default; the name, type and status an
// instance always has are required.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentctl/sandbox.hpp"
#include "provider/incus/client/client.hpp"

namespace agentctl::provider::incus {

// Config keys to text values (config, expanded_config, a device).
using ConfigMap = std::map<std::string, std::string, std::less<>>;
// Device names to their config.
using DeviceMap = std::map<std::string, ConfigMap, std::less<>>;

// api.InstanceStateNetworkAddress.
struct InstanceAddress {
    std::string family;  // "inet" or "inet6"
    std::string address;
    std::string netmask;
    std::string scope;  // "global", "link", "local"
};

// api.InstanceStateNetwork (what agentctl reads of an interface).
struct InstanceInterface {
    std::vector<InstanceAddress> addresses;
    std::string hwaddr;
    std::string host_name;
    std::string state;  // "up" or "down"
    std::string type;   // "broadcast", "loopback", ...
};

// api.InstanceState.
struct InstanceState {
    std::string status;  // as Incus says it
    IncusStatus status_code = IncusStatus::Other;
    int pid = 0;  // the init process (a VM's qemu) as the host sees it; 0 when stopped (Incus: -1 or 0)
    std::map<std::string, InstanceInterface, std::less<>> network;
    std::int64_t memory_usage = 0;       // bytes
    std::int64_t memory_usage_peak = 0;  // bytes
    std::int64_t processes = 0;          // -1 when Incus cannot count them
};

// api.Instance.
struct Instance {
    std::string name;
    Isolation type = Isolation::Container;  // "container" or "virtual-machine"
    std::string status;                     // as Incus says it
    IncusStatus status_code = IncusStatus::Other;
    std::string project;
    std::string location;  // the cluster member; "none" on a standalone server
    std::string architecture;
    std::string created_at;
    std::string description;
    bool ephemeral = false;
    bool stateful = false;
    std::vector<std::string> profiles;
    ConfigMap config;
    ConfigMap expanded_config;
    DeviceMap devices;
    DeviceMap expanded_devices;
    std::optional<InstanceState> state;  // only with recursion=2 (or an instance's ?recursion=1)

    [[nodiscard]] bool running() const { return status_code == IncusStatus::Running; }
    // The text of `key` in the instance's own config; empty when absent.
    [[nodiscard]] std::string config_value(std::string_view key) const;
};

// api.InstanceSnapshot (what agentctl reads of one).
struct InstanceSnapshot {
    std::string name;  // "INSTANCE/SNAPSHOT" as Incus lists it
    std::string created_at;
    bool stateful = false;
    ConfigMap config;
};

// Parsers of Incus's answers; each throws agentctl::Error naming the instance
// and the field when the answer is malformed.
[[nodiscard]] Instance parse_instance(const Json& answer);
// GET /1.0/instances/NAME/state of `instance`.
[[nodiscard]] InstanceState parse_instance_state(const Json& answer, std::string_view instance);
[[nodiscard]] InstanceSnapshot parse_instance_snapshot(const Json& answer, std::string_view instance);

// The writable fields of `instance` (api.InstancePut) as PUT /1.0/instances/NAME takes them.
[[nodiscard]] Json instance_put_body(const Instance& instance);

}  // namespace agentctl::provider::incus
