// Pure builders of the Incus API request bodies agentctl sends. Each follows
// the Incus REST API documentation (doc/rest-api.yaml, doc/reference/*); the
// unit tests check them field by field without a daemon.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agentctl/sandbox.hpp"
#include "policy/mounts.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/network/subnet_pool.hpp"

namespace agentctl::provider::incus {

// The sandbox user as bootstrapped inside the guest.
inline constexpr int k_default_guest_uid = policy::k_unprivileged_owner_id;

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
// Who serves DHCP and DNS on it: Incus (its dnsmasq) or agentctl on the host
// (host_resolver.hpp; Incus's DHCP and DNS are then turned off).
enum class BridgeResolver { Incus, Host };
[[nodiscard]] Json network_payload(const std::string& sandbox, const std::string& bridge, const Ipv4Net& subnet,
                                   const std::string& acl, BridgeResolver resolver);
// The instance record of it (key::k_resolver; read in sandbox_record.hpp).
[[nodiscard]] std::string_view resolver_record(BridgeResolver resolver);

// Who owns a writable mount on the host (stat of its canonical path).
struct MountOwner {
    std::string host_path;
    int uid = -1;
    int gid = -1;
};

// The one host user a sandbox's user stands for: host_uid/host_gid (the owner
// of the writable mounts) appear inside as guest_uid/guest_gid. No other host
// id is mapped; root inside is an unprivileged id of the sandbox's own range.
struct IdentityMap {
    int host_uid = -1;
    int host_gid = -1;
    int guest_uid = -1;
    int guest_gid = -1;
};

// The uid the sandbox user gets: the owner's uid when it is an ordinary user
// id (1000..59999, so ids match inside and out), else 1500.
[[nodiscard]] int guest_uid_for(const std::vector<MountOwner>& writable_owners);

// The identity map for a sandbox whose user has `guest_uid` (= its gid):
// nullopt when no mount is writable. Throws agentctl::Error when a writable
// mount belongs to root (host root is never mapped) or when writable mounts
// have different owners (only one host user can be mapped), naming the mounts.
[[nodiscard]] std::optional<IdentityMap> plan_identity_map(const std::vector<MountOwner>& writable_owners,
                                                           int guest_uid);

// raw.idmap (doc: userns-idmap, "Custom idmaps"): "uid HOST GUEST\ngid HOST GUEST".
[[nodiscard]] std::string raw_idmap_value(const IdentityMap& map);

// Whether /etc/subuid (or subgid) text lets root map host id `id`: newuidmap
// refuses any other (an entry "root:START:COUNT" or "0:START:COUNT" covers it).
[[nodiscard]] bool subordinate_ids_allow(const std::string& text, int id);

// The instance's devices: root disk (pool, size), eth0 on the bridge, one disk
// device per mount, one proxy device per published port (listen on
// PortForward::listen_address, connect to the guest's loopback).
// Disk devices: readonly=true unless writable. Never shift=true: a shifted
// (identity-mapped) mount makes root inside root on the host files. In
// containers ownership follows the instance's idmap (raw.idmap maps only the
// owner); in VMs directory shares use io.bus=virtiofs, where virtiofsd
// translates ids by raw.idmap and forbids every other guest id (Incus
// internal/server/device/device_utils_disk.go, DiskVMVirtiofsdStart:
// --translate-uid=map:... and forbid-guest:...); 9p is refused with an idmap.
[[nodiscard]] Json instance_devices(const SandboxSpec& spec, const std::string& bridge, const std::string& pool);
[[nodiscard]] Json mount_devices(const std::vector<Mount>& mounts, Isolation isolation);
[[nodiscard]] Json port_devices(const std::vector<PortForward>& ports);

// The instance config: limits.cpu, limits.memory, security.guestapi=false
// (no /dev/incus: it would show guest root every user.agentctl.* key and
// device source path); for containers security.idmap.isolated=true (a uid range
// of its own) and limits.processes; raw.idmap when `idmap` is given; for VMs
// security.secureboot=false; and the user.agentctl.* records (sandbox_record_config).
[[nodiscard]] std::map<std::string, std::string> instance_config(const SandboxSpec& spec, const std::string& bridge,
                                                                 const Ipv4Net& subnet, bool acl_attached,
                                                                 const std::optional<IdentityMap>& idmap);

// The PATH of commands run as the sandbox user (exec, shell, agent installs):
// the user's own bin directories first (~/.local/bin, where agents install
// themselves, and ~/.npm-global/bin, agentctl's npm prefix), then the system's.
[[nodiscard]] std::string guest_path(const std::string& home);

// A hex fingerprint (12+ digits) selects an image directly; anything else is an alias.
[[nodiscard]] bool is_image_fingerprint(std::string_view image);

// Incus's instance type of an isolation: "virtual-machine" | "container".
[[nodiscard]] std::string_view instance_type_name(Isolation isolation);

// POST /1.0/instances: source = the local image alias (or fingerprint),
// type container | virtual-machine, `start: true` (extension instance_create_start).
[[nodiscard]] Json instance_payload(const SandboxSpec& spec, const std::map<std::string, std::string>& config,
                                    const Json& devices, bool start);

// The environment every command agentctl runs in the guest starts from: PATH
// (guest_path for the user), LANG, HOME, USER, LOGNAME, and for the user
// NPM_CONFIG_PREFIX=~/.npm-global (global npm installs without root).
[[nodiscard]] std::map<std::string, std::string> exec_environment(const GuestUser* user);

// POST /1.0/instances/NAME/exec without websockets: the command runs to the
// end and its output is recorded to log files (extension container_exec_recording;
// user/group/cwd: container_exec_user_group_cwd).
[[nodiscard]] Json exec_payload(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                                const GuestUser* user);
// The same command with its output streamed instead of recorded:
// "wait-for-websocket": true, "record-output": false (see exec_stream.hpp).
[[nodiscard]] Json streamed_exec_payload(const std::vector<std::string>& argv,
                                         const std::map<std::string, std::string>& env, const GuestUser* user);

// PUT /1.0/instances/NAME/state.
[[nodiscard]] Json state_payload(const std::string& action, bool force, int timeout_seconds);

// POST /1.0/images: pull REF from a simplestreams remote, aliased REF locally.
[[nodiscard]] Json image_pull_payload(const std::string& remote_url, const std::string& ref);
// POST /1.0/images: publish a stopped instance as a local image aliased OUT,
// with `properties` (string values) besides its description.
[[nodiscard]] Json image_publish_payload(const std::string& instance, const std::string& alias,
                                         const Json& properties = Json::object());

// Byte sizes as Incus config values ("4294967296B").
[[nodiscard]] std::string bytes_value(std::uint64_t bytes);

}  // namespace agentctl::provider::incus
