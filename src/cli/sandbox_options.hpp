// The flags of create/start that shape a sandbox, as the user typed them.
// spec_builder.cpp turns them (with profiles and config) into a SandboxSpec
// through the policy layer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "agentctl/sandbox.hpp"
#include "cli/session.hpp"
#include "policy/profile_store.hpp"

namespace agentctl::cli {

struct MountOptions {
    std::vector<std::string> mounts;  // --mount host[:guest][:w|:ro]
    bool only = false;                // --mount-only
    bool none = false;                // --mount-none
    bool writable = false;            // --mount-writable
};

struct CreateOptions {
    std::string name;
    std::string image;
    std::string spec_file;
    std::vector<std::string> profiles;
    std::vector<std::string> allow;
    std::vector<std::string> allow_files;
    std::vector<std::string> allow_presets;  // each may be "a,b"
    bool deny_lan = false;
    bool allow_lan = false;
    bool no_network_policy = false;
    std::vector<std::string> budgets;  // --budget HOST:PORT=SIZE
    std::vector<std::string> ports;
    std::optional<int> cpu_cores;
    std::string memory;
    std::string processes;  // --processes N
    std::string disk_size;
    std::string agent;
    std::vector<std::string> packages;
    std::string isolation;  // vm | container | empty (profile or default)
    std::string target;     // --target MEMBER: the cluster member (Incus clusters)
    bool keep_on_failure = false;
    std::vector<std::string> secrets;  // --secret NAME[=ENV]
    MountOptions mount;
};

// Where profiles are searched, from --profile-dir, the configuration and the
// process environment.
[[nodiscard]] policy::Environment policy_environment(Session& session);

// Adds the flags that shape the network policy (--profile, --allow,
// --allow-file, --allow-preset, --deny-lan, --allow-lan, --no-network-policy,
// --agent) to a command: create, and policy check, which must accept exactly
// what create accepts. Returns the --profile option.
CLI::Option* add_policy_flags(CLI::App& command, CreateOptions& options);

// Adds --mount, --mount-only, --mount-none, --mount-writable to a command.
void add_mount_flags(CLI::App& command, MountOptions& options);

// Computes the effective spec: profiles (organisation floor first), flags,
// presets, agent, mounts resolved and checked. Throws agentctl::Error (exit 1)
// listing every problem; nothing is created then. Missing mount directories
// (createMissing) are made only when `create_directories` is set. `notices`
// receives a sentence per profile mount that a --mount replaced.
[[nodiscard]] SandboxSpec build_sandbox_spec(Session& session, const CreateOptions& options, bool create_directories,
                                             std::vector<std::string>* notices = nullptr);

// The network policy create would compute from the same flags (profiles,
// allow entries, files, presets, agent, LAN flags), for `policy check`.
[[nodiscard]] policy::NetworkPolicy build_network_policy(Session& session, const CreateOptions& options);

// For start: the mounts the flags ask for, checked against the mount policy of
// the given profiles; nullopt when no mount flag was given (keep the sticky set).
// The mounts recorded for sandbox `name` checked again before they are used
// (policy::recheck_start_mounts under `profiles` and the base profile).
void recheck_recorded_mounts(Session& session, const std::string& name, const std::vector<std::string>& profiles,
                             const std::vector<Mount>& recorded);

[[nodiscard]] std::optional<std::vector<Mount>> build_start_mounts(Session& session, const std::string& name,
                                                                   const std::vector<std::string>& profiles,
                                                                   const MountOptions& options,
                                                                   std::vector<std::string>* notices = nullptr);

}  // namespace agentctl::cli
