// Deterministic names of everything agentctl makes in Incus for one sandbox,
// and the instance config keys it records. Everything is derived from the
// sandbox name alone, so delete can find and remove each piece even when
// create was interrupted before it recorded anything.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "agentctl/host_network.hpp"
#include "agentctl/hash.hpp"

namespace agentctl::provider::incus {

// Every sandbox bridge's name starts with this (agentctl/host_network.hpp).
inline constexpr std::string_view k_bridge_prefix = policy::k_sandbox_bridge_prefix;
// `agc-` + 11 hex digits of a 64-bit FNV-1a hash of the sandbox name: 15
// characters, the Linux interface name limit.
[[nodiscard]] std::string bridge_name(std::string_view sandbox);
// The 64-bit FNV-1a hash of `text` (names, and digests that only tell "changed").
using agentctl::fnv1a64;
// `agentctl-NAME`.
[[nodiscard]] std::string acl_name(std::string_view sandbox);
// `NAME-egress`: the companion instance that runs the sandbox's egress proxy
// when it is placed in an instance (egress_host.hpp).
[[nodiscard]] std::string companion_name(std::string_view sandbox);
// Every warm pool entry's instance name starts with this (`agc-pool-` and 8
// hex digits); create refuses sandbox names that do.
inline constexpr std::string_view k_pool_prefix = "agc-pool-";
// Disk device name for the Nth mount, proxy device name for a published port.
[[nodiscard]] std::string mount_device_name(std::size_t index);
[[nodiscard]] std::string port_device_name(std::string_view protocol, unsigned host_port);
[[nodiscard]] bool is_mount_device(std::string_view device);
[[nodiscard]] bool is_port_device(std::string_view device);

// Refuses a sandbox name Incus would refuse (1-63 of [a-z0-9-], starting with a
// letter, not ending in '-'), before anything is made. Throws agentctl::Error.
void check_sandbox_name(std::string_view sandbox);

// Instance config keys (all under user.agentctl.).
namespace key {
inline constexpr std::string_view k_managed = "user.agentctl.managed";
inline constexpr std::string_view k_user = "user.agentctl.user";
inline constexpr std::string_view k_uid = "user.agentctl.uid";
inline constexpr std::string_view k_gid = "user.agentctl.gid";
inline constexpr std::string_view k_home = "user.agentctl.home";
inline constexpr std::string_view k_shell = "user.agentctl.shell";
inline constexpr std::string_view k_isolation = "user.agentctl.isolation";
inline constexpr std::string_view k_image = "user.agentctl.image";
inline constexpr std::string_view k_profiles = "user.agentctl.profiles";
inline constexpr std::string_view k_network = "user.agentctl.network";
inline constexpr std::string_view k_mounts = "user.agentctl.mounts";
inline constexpr std::string_view k_ports = "user.agentctl.ports";
inline constexpr std::string_view k_packages = "user.agentctl.packages";
inline constexpr std::string_view k_widenings = "user.agentctl.widenings";
inline constexpr std::string_view k_agent = "user.agentctl.agent";
inline constexpr std::string_view k_agent_installed = "user.agentctl.agent.installed";
// "true" from the instance's creation until its create finished: an instance
// that still has it was left by a create that was killed, and the next create
// of that name removes it with the rest of the leftovers.
inline constexpr std::string_view k_create_pending = "user.agentctl.create.pending";
inline constexpr std::string_view k_confinement = "user.agentctl.confinement";
// The probe battery's results, one {name, verdict, detail} per probe (JSON).
inline constexpr std::string_view k_confinement_probes = "user.agentctl.confinement.probes";
// What the last probe run rests on: who probed ("host": agentctl in the
// sandbox's network namespace; "guest": the guest's own battery), when (RFC
// 3339), the instance's init pid then (a start without agentctl changes it),
// and digests of agentctl's nft table and of the nft chain Incus made of the
// bridge's ACL, as they were (status compares them).
inline constexpr std::string_view k_confinement_source = "user.agentctl.confinement.source";
inline constexpr std::string_view k_confinement_at = "user.agentctl.confinement.at";
inline constexpr std::string_view k_confinement_pid = "user.agentctl.confinement.pid";
inline constexpr std::string_view k_confinement_firewall = "user.agentctl.confinement.firewall";
inline constexpr std::string_view k_confinement_acl_chain = "user.agentctl.confinement.acl-chain";
inline constexpr std::string_view k_bridge = "user.agentctl.bridge";
inline constexpr std::string_view k_acl = "user.agentctl.acl";
inline constexpr std::string_view k_subnet = "user.agentctl.subnet";
// Who serves the bridge's DHCP and DNS: "host" = agentctl's resolver on the
// host (host_resolver.hpp); absent (sandboxes made before it) or "incus" =
// the bridge's own dnsmasq.
inline constexpr std::string_view k_resolver = "user.agentctl.resolver";
// On the bridge, the ACL and the companion instance: which sandbox they
// belong to (delete checks it).
inline constexpr std::string_view k_sandbox = "user.agentctl.sandbox";
// On the bridge and the ACL, which Incus keeps in the default project whatever
// the sandbox's: the sandbox's project, absent for the default project.
inline constexpr std::string_view k_project = "user.agentctl.project";
// On the instance and its bridge: the uid (and gid) of the sandbox's host
// processes, and the directory of their files (host_user.hpp).
inline constexpr std::string_view k_host_uid = "user.agentctl.host.uid";
inline constexpr std::string_view k_host_state = "user.agentctl.host.state";
// Where the sandbox's egress proxy runs: "host" (or absent) | "instance".
inline constexpr std::string_view k_egress = "user.agentctl.egress";
// On an instance agentctl made that is not a sandbox: what it is
// ("egress-proxy" for a companion). `list` shows only instances without it.
inline constexpr std::string_view k_role = "user.agentctl.role";
inline constexpr std::string_view k_role_egress_proxy = "egress-proxy";
// A warm pool entry (provider_pool.cpp): a deny-all sandbox made ahead of time
// that no one uses; create takes it (the role goes, k_name comes).
inline constexpr std::string_view k_role_pool = "pool";
// On a pool entry: a digest of what it was made with (pool_template_digest);
// create takes only an entry whose digest is the one its sandbox would have.
inline constexpr std::string_view k_pool_template = "user.agentctl.pool.template";
// On an instance taken from the pool: the sandbox's name (the instance keeps
// the entry's name, and its bridge, ACL and host state keep theirs).
inline constexpr std::string_view k_name = "user.agentctl.name";
}  // namespace key

}  // namespace agentctl::provider::incus
