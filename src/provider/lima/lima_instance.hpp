// One instance as `limactl list NAME --json` reports it, reduced to the fields
// agentctl reads. Lima prints one JSON object per line (JSON Lines), not an
// array; field names follow Lima's limatype.Instance and limatype.LimaYAML
// (lima-vm/lima pkg/limatype/lima_instance.go, pkg/limatype/lima_yaml.go).
// `config` is the *effective* configuration: Lima's limayaml.Load merges
// $LIMA_HOME/_config/default.yaml and override.yaml into the instance's own
// lima.yaml (pkg/limayaml/load.go), which is exactly what start must vet.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::provider::lima {

struct LimaMount {
    std::string location;     // host directory (Lima expands ~)
    std::string mount_point;  // guest path; Lima's default is the location
    bool writable = false;    // Lima's default: false
};

struct LimaPortForward {
    int guest_port = 0;
    int host_port = 0;
    std::string host_ip;
    std::string guest_socket;
    std::string host_socket;
    std::string proto;
    bool reverse = false;
};

struct LimaNetwork {
    std::string lima;    // a managed network name (shared, bridged, user-v2 ...)
    std::string socket;  // an unmanaged socket_vmnet socket
    bool vz_nat = false;
    std::string interface;
};

struct LimaCopyToHost {
    std::string guest;
    std::string host;
};

struct LimaConfig {
    std::string vm_type;
    std::optional<std::string> user_name;
    std::vector<LimaMount> mounts;
    bool forward_agent = false;
    bool forward_x11 = false;
    std::optional<int> ssh_local_port;
    std::vector<LimaPortForward> port_forwards;
    std::vector<LimaCopyToHost> copy_to_host;
    std::vector<LimaNetwork> networks;
    std::map<std::string, std::string> env;
    std::optional<bool> propagate_proxy_env;
    std::optional<bool> host_resolver_enabled;
    std::vector<std::string> dns;
    std::vector<std::string> image_locations;
};

struct LimaInstance {
    std::string name;
    std::string status;  // Running | Stopped | Broken | ...
    std::string dir;
    std::string vm_type;
    std::string arch;
    int cpus = 0;
    std::int64_t memory = 0;  // bytes
    std::int64_t disk = 0;    // bytes
    int ssh_local_port = 0;
    int host_agent_pid = 0;  // 0 when not running
    std::vector<std::string> errors;
    // false: `config` was null or missing (Lima could not load lima.yaml or
    // its _config files); then nothing about the instance can be verified.
    bool has_config = false;
    LimaConfig config;
};

// Parses one line of `limactl list --json`. `home` expands a leading ~ in
// mount locations. Throws agentctl::Error naming the field that has the wrong
// type (a newer Lima with a changed shape must not be misread silently).
[[nodiscard]] LimaInstance parse_instance_json(std::string_view line, const std::string& home);

// Parses the whole output: one instance per non-empty line.
[[nodiscard]] std::vector<LimaInstance> parse_instance_list(std::string_view output, const std::string& home);

}  // namespace agentctl::provider::lima
