// What a sandbox is made of: the fully resolved request a provider receives.
//
// The CLI and the policy layer turn flags and profiles into a SandboxSpec; a
// provider only ever sees checked, canonical values (mount paths resolved,
// allow rules parsed, sizes in bytes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentctl/policy.hpp"

namespace agentctl {

struct Mount {
    std::string host_path;   // canonical (symlinks resolved), checked against the mount policy
    std::string guest_path;  // absolute
    bool writable = false;
    std::string origin;  // "--mount", "profile default", ...

    friend bool operator==(const Mount&, const Mount&) = default;
};

struct PortForward {
    std::string listen_address = "127.0.0.1";  // host side; loopback unless the user asks
    std::uint16_t host_port = 0;
    std::uint16_t guest_port = 0;
    std::string protocol = "tcp";  // tcp | udp

    friend bool operator==(const PortForward&, const PortForward&) = default;
};

struct Resources {
    int cpu_cores = 0;               // 0: provider default
    std::uint64_t memory_bytes = 0;  // 0: provider default
    std::uint64_t disk_bytes = 0;    // 0: provider default
    int processes = 0;               // most tasks (processes and threads) at once; 0: k_default_processes
};

// The process limit a sandbox gets when no profile or flag sets a lower one.
inline constexpr int k_default_processes = 2048;
inline constexpr int k_max_processes = 1000000;

// True for an address only this machine can reach (127.0.0.0/8, ::1, localhost).
[[nodiscard]] bool is_loopback_address(const std::string& address);

enum class Isolation { Vm, Container };

// A secret (`agentctl secret`) the sandbox may use: the guest variable `env`
// holds a placeholder, and the sandbox's egress proxy puts the value in where
// the placeholder stands, in requests to the hosts the secret is bound to.
// Where the proxy puts a secret: requests to `host` (port 443), in the request
// header `header` (lower case), which may carry it as is, after `Bearer` or
// `token`, or inside Basic credentials.
struct SecretHost {
    std::string host;
    std::string header;
    friend bool operator==(const SecretHost&, const SecretHost&) = default;
};

struct SecretUse {
    std::string name;
    std::string env;
    // Where it is injected: the binding's hosts, else the secret's own, else
    // the catalog's, less the hosts a profile forbids it on.
    std::vector<SecretHost> hosts;
    std::string origin;  // "--secret", "agent claude", "profile team (FILE:LINE)"

    friend bool operator==(const SecretUse&, const SecretUse&) = default;
};

struct SandboxSpec {
    std::string name;
    std::string image;
    std::vector<std::string> profiles;  // names, in the order applied
    policy::NetworkPolicy network;
    std::vector<PortForward> ports;
    std::vector<Mount> mounts;
    Resources resources;
    std::vector<std::string> packages;  // neutral names (see the package catalog)
    std::string agent;                  // empty: no agent to install
    std::string user = "agent";         // the non-root user exec/shell run as
    Isolation isolation = Isolation::Vm;
    std::string viewer;  // spice | vnc | native | empty
    // The cluster member to place the sandbox on (`create --target`); empty:
    // the backend decides. Only providers with placement.target accept one.
    std::string target;
    // `create --keep-on-failure`: a create that fails keeps what it made (to
    // look into) instead of removing it.
    bool keep_on_failure = false;
    std::vector<SecretUse> secrets;  // create --secret, and the agent's credential when it is stored
};

// Each way the spec is weaker than agentctl's defaults, as a sentence for a
// warning line and for `status`: allow-LAN, no network policy, writable mounts,
// container isolation, ports published on a non-loopback address.
[[nodiscard]] std::vector<std::string> widenings(const SandboxSpec& spec);

}  // namespace agentctl
