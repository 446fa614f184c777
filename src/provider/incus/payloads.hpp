// Pure builders of the Incus API request bodies agentctl sends. Each follows
// the Incus REST API documentation (doc/rest-api.yaml, doc/reference/*); the
// unit tests check them field by field without a daemon.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agentctl/sandbox.hpp"
#include "provider/incus/client.hpp"
#include "provider/incus/subnet_pool.hpp"

namespace agentctl::provider::incus {

// The sandbox user as bootstrapped inside the guest.
struct GuestUser {
    std::string name;
    int uid = -1;
    int gid = -1;
    std::string home;
    std::string shell;
};

// POST /1.0/networks: a managed bridge with its own subnet, IPv4 NAT on (so
// allowed public destinations are reachable), no IPv6, and, when `acl` is not
// empty, the sandbox's ACL with both default actions `reject`
// (security.acls.default.{egress,ingress}.action; extension network_bridge_acl).
[[nodiscard]] Json network_payload(const std::string& sandbox, const std::string& bridge, const Ipv4Net& subnet,
                                   const std::string& acl);

// The instance's devices: root disk (pool, size), eth0 on the bridge, one disk
// device per mount (readonly=true unless writable; shift=true in containers so
// ownership inside matches the host), one proxy device per published port
// (listen on PortForward::listen_address, connect to the guest's loopback).
[[nodiscard]] Json instance_devices(const SandboxSpec& spec, const std::string& bridge, const std::string& pool);
[[nodiscard]] Json mount_devices(const std::vector<Mount>& mounts, Isolation isolation);
[[nodiscard]] Json port_devices(const std::vector<PortForward>& ports);

// The instance config: limits.cpu, limits.memory, for VMs security.secureboot=false,
// and the user.agentctl.* records (see naming.hpp).
[[nodiscard]] std::map<std::string, std::string> instance_config(const SandboxSpec& spec, const std::string& bridge,
                                                                 const Ipv4Net& subnet, bool acl_attached);

// A hex fingerprint (12+ digits) selects an image directly; anything else is an alias.
[[nodiscard]] bool is_image_fingerprint(std::string_view image);

// POST /1.0/instances: source = the local image alias (or fingerprint),
// type container | virtual-machine, `start: true` (extension instance_create_start).
[[nodiscard]] Json instance_payload(const SandboxSpec& spec, const std::map<std::string, std::string>& config,
                                    const Json& devices, bool start);

// POST /1.0/instances/NAME/exec without websockets: the command runs to the
// end and its output is recorded to log files (extension container_exec_recording;
// user/group/cwd: container_exec_user_group_cwd).
[[nodiscard]] Json exec_payload(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                                const GuestUser* user);

// PUT /1.0/instances/NAME/state.
[[nodiscard]] Json state_payload(const std::string& action, bool force, int timeout_seconds);

// POST /1.0/images: pull REF from a simplestreams remote, aliased REF locally.
[[nodiscard]] Json image_pull_payload(const std::string& remote_url, const std::string& ref);
// POST /1.0/images: publish a stopped instance as a local image aliased OUT.
[[nodiscard]] Json image_publish_payload(const std::string& instance, const std::string& alias);

// The JSON records of mounts and ports kept in the instance config.
[[nodiscard]] std::string mounts_record(const std::vector<Mount>& mounts);
[[nodiscard]] std::vector<Mount> parse_mounts_record(const std::string& text);

// Byte sizes as Incus config values ("4294967296B").
[[nodiscard]] std::string bytes_value(std::uint64_t bytes);

}  // namespace agentctl::provider::incus
