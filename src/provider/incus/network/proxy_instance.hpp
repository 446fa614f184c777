// What the companion instance of a sandbox's egress proxy is made of (instance
// placement, egress_host.hpp): its Incus payload, the bundle of agentctl's own
// binary pushed into it, the systemd unit that runs the proxy and the script
// that sets it up. All pure; egress_instance.cpp does the I/O.
//
// The companion is a container from the sandbox's image on the sandbox's own
// bridge, at the subnet's third host address (fixed, set by LXC before init;
// no DHCP client, no IPv6, no router advertisements: nothing on the bridge can
// move it), with small limits, no mounts, its own uid range and no guest API.
// It is marked as agentctl's (user.agentctl.managed, user.agentctl.sandbox)
// with user.agentctl.role=egress-proxy, so that delete and the test clean-up
// find it and `list` does not show it as a sandbox.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "provider/incus/client/client.hpp"
#include "provider/incus/network/egress_host.hpp"

namespace agentctl::provider::incus {

// Where everything lives inside the companion.
inline constexpr std::string_view k_companion_bin = "/opt/agentctl/bin/agentctl";
inline constexpr std::string_view k_companion_lib = "/opt/agentctl/lib";
inline constexpr std::string_view k_companion_etc = "/etc/agentctl-egress";      // policy, resolve file (root, 0644)
inline constexpr std::string_view k_companion_run = "/var/lib/agentctl-egress";  // the proxy's log (nobody, 0700)
inline constexpr std::string_view k_companion_unit = "agentctl-egress.service";
// The server's own routing table, mounted read-only from the server's
// /proc/1/net/fib_trie (device k_companion_server_routes_device): the proxy
// reads it at every connection and refuses every address the server
// delivers to itself then (ProxyOptions::server_routes).
inline constexpr std::string_view k_companion_server_routes = "/opt/agentctl-server/fib_trie";
inline constexpr std::string_view k_companion_server_routes_device = "server-routes";
inline constexpr std::string_view k_server_fib_trie = "/proc/1/net/fib_trie";

[[nodiscard]] std::string companion_policy_path();   // ETC/policy.json
[[nodiscard]] std::string companion_resolve_path();  // ETC/resolve
[[nodiscard]] std::string companion_log_path();      // RUN/egress.log

// The companion's limits: enough for the proxy (an event loop and a few
// threads) and the container's systemd, nothing more.
inline constexpr std::string_view k_companion_cpu = "1";
inline constexpr std::string_view k_companion_memory = "256MiB";  // the sanitizer build of agentctl is large
inline constexpr std::string_view k_companion_processes = "128";

// The companion's sockets are bounded like the host proxy's, from the same
// settings: the proxy's cap on open tunnels (incus.proxyMaxTunnels) and the
// kernel TCP memory of its sockets (incus.hostSocketMemory), charged to the
// companion and capped there — memory.kmem.tcp on a cgroup v1 server, which
// limits.memory does not cover there (LXC ignores the key on a pure cgroup v2
// server, where socket memory is part of limits.memory). So one sandbox
// cannot touch the server's global TCP memory through its companion, during
// its life or after it is deleted (orphaned sockets stay charged to it).
struct CompanionLimits {
    std::uint64_t socket_memory_bytes = 128ULL * 1024 * 1024;
    std::uint64_t max_tunnels = 256;
};

// POST /1.0/instances for the companion of `site` (started), from the
// sandbox's image, in storage pool `pool`.
// Its devices: the root disk, eth0 on the sandbox's bridge, and the server's
// routing table (server_routes_device).
[[nodiscard]] Json companion_payload(const EgressSite& site, const std::string& pool, const CompanionLimits& limits);

// The read-only disk device that shows the server's /proc/1/net/fib_trie (the
// kernel's table of the server's network namespace, whoever reads it) at
// k_companion_server_routes.
[[nodiscard]] ConfigMap server_routes_device();

// What Incus has on the sandbox's bridge besides the sandbox and its
// companion in `project` (empty: the default project), from the bridge's
// `used_by` (GET /1.0/networks/BRIDGE): "instance NAME", "instance NAME
// (project P)", "profile NAME", ... in Incus's order. The bridge admits the
// proxy's traffic by the companion's address, which any instance on the
// bridge can take while the companion is stopped (Incus 6.0 has no per-port
// ACL on a bridge), so agentctl verifies and starts a sandbox only while
// nothing else is on its bridge.
[[nodiscard]] std::vector<std::string> bridge_strangers(const Json& network, const std::string& sandbox,
                                                        const std::string& project);

// Which files make up agentctl's binary: the executable, and when it is
// dynamically linked, the libraries `ldd` lists and the loader that runs it
// with only those (so the companion's own libraries never matter).
struct Bundle {
    std::string executable;              // host path
    std::string loader;                  // host path of ld-linux*.so; empty: statically linked
    std::vector<std::string> libraries;  // host paths (the loader not among them)
};

// Parses `ldd EXECUTABLE`'s output. Throws agentctl::Error naming a library
// ldd could not find.
[[nodiscard]] Bundle parse_ldd(const std::string& executable, const std::string& ldd_output);

// Host path -> path inside the companion, for every file of the bundle.
[[nodiscard]] std::map<std::string, std::string> bundle_files(const Bundle& bundle);

// The proxy's command line inside the companion: through the bundled loader
// with --library-path when dynamically linked.
[[nodiscard]] std::vector<std::string> companion_command(const Bundle& bundle, const EgressSite& site,
                                                         bool resolve_file, const CompanionLimits& limits);

// The systemd unit: the proxy as nobody, no capabilities, no new privileges,
// restarted when it exits, reloaded by SIGHUP (ExecReload), enabled so that
// it comes back with the companion.
// Before the proxy starts, its own memory cgroup gets the companion's TCP
// memory limit (cgroup v1 counts socket memory only where one was written).
[[nodiscard]] std::string companion_unit(const std::vector<std::string>& command, const std::string& sandbox,
                                         const CompanionLimits& limits);

// `sha256sum` output -> path -> hash.
[[nodiscard]] std::map<std::string, std::string> parse_sha256sums(const std::string& output);

// Run as root in the companion after the files are pushed: the static network
// (no DHCP, no IPv6), the resolver (the bridge's own dnsmasq, which answers
// allowlisted names only), the directories, the unit (written from UNIT_FILE
// pushed next to it), then the proxy (re)started when `restart` or when the
// unit changed, else only started, and waited for on its port. Prints
// `agentctl-egress-up` when it listens.
[[nodiscard]] std::string companion_setup_script(const EgressSite& site, bool restart);

// The unit file is pushed here before the setup script runs.
[[nodiscard]] std::string companion_unit_upload_path();

}  // namespace agentctl::provider::incus
