// The ONE function that turns everything the user gave (flags, --spec file,
// profiles) into a sandbox's effective spec, and its start-time counterpart
// for mounts.
#pragma once

#include <string>
#include <vector>

#include "agentctl/sandbox.hpp"
#include "policy/profile_store.hpp"

namespace agentctl::policy {

// The sandbox user when no --agent names one.
inline constexpr std::string_view k_default_user = "agent";

struct MountFlags {
    std::vector<std::string> mounts;  // --mount host[:guest][:w|:ro], in order
    bool only = false;                // --mount-only: replace the profile's mounts
    bool none = false;                // --mount-none: no mounts at all
    bool writable = false;            // --mount-writable: every mount writable
};

struct SpecInputs {
    std::string name;
    std::string image;                       // --image (empty: from --spec or the provider default)
    std::string spec_file;                   // --spec FILE (not with --image/--profile)
    std::vector<std::string> profiles;       // --profile, in order; empty: env.default_profile
    std::vector<std::string> allow;          // --allow ENTRY
    std::vector<std::string> allow_files;    // --allow-file F (relative to env.cwd)
    std::vector<std::string> allow_presets;  // --allow-preset a,b (each may be a comma list)
    bool allow_lan = false;                  // --allow-lan
    bool deny_lan = false;                   // --deny-lan (the default; conflicts with --allow-lan)
    bool no_network_policy = false;          // --no-network-policy
    std::vector<std::string> budgets;        // --budget HOST:PORT=SIZE (tighten-only: the lowest wins)
    std::vector<std::string> ports;          // --port [addr:]host:guest[/tcp|udp]
    std::string cpu_cores;                   // --cpu-cores N (empty: from profiles)
    std::string memory;                      // --memory 4GiB
    std::string disk_size;                   // --disk-size 20GiB
    std::string processes;                   // --processes N (tighten-only: the lowest limit wins)
    std::string agent;                       // --agent NAME
    std::vector<std::string> packages;       // --package NAME
    MountFlags mount_flags;
    std::string isolation;             // --isolation vm|container (empty: from profiles)
    std::string target;                // --target MEMBER (empty: the backend places the sandbox)
    std::vector<std::string> secrets;  // --secret NAME[=ENV], after the profiles' secrets.bind
    Environment env;
    // false: create no missing mount directory (see MountContext::create_directories).
    bool create_directories = true;
};

// Computes the effective spec: profiles layered in order (each over its
// organisation floor), then the --spec file's overrides, then the flags.
// Allow rules carry their origins ("--allow", "preset apt", "agent claude",
// "profile strict (FILE:LINE)", "allow file X:3"). Mounts are resolved and
// checked against the merged mountPolicy (directories are created only when
// createMissing is set and every check passed). Throws agentctl::Error (exit
// 1) listing every problem; nothing on disk changes then. A --mount onto the
// guest path of a profile's mount replaces that mount; `notices` (when given)
// receives one sentence per replacement, for the user to see, and one per
// host a profile's secrets.forbid takes from a secret (see secret_uses).
[[nodiscard]] SandboxSpec compute_sandbox_spec(const SpecInputs& inputs, std::vector<std::string>* notices = nullptr);

// Only the network policy of the same computation (no mounts resolved, no
// directories created): for `policy check --profile ... --allow ...`.
[[nodiscard]] NetworkPolicy compute_network_policy(const SpecInputs& inputs);

// `start NAME [--profile P...] [mount flags]`: nullopt when no mount flag was
// given (the sticky set stays); otherwise the new mount set, where only the
// given profiles' mountPolicy constrains (their mounts are not added).
// `previous` is the sticky set, used as the base for additive --mount.
// `notices` (optional) receives what a --mount replaced; `create_directories`
// false (--preview): no createMissing directory is made.
[[nodiscard]] std::optional<std::vector<Mount>> resolve_start_mounts(
    const std::string& name, const std::vector<std::string>& profiles, const MountFlags& flags,
    const std::vector<Mount>& previous, const Environment& env, std::vector<std::string>* notices = nullptr,
    bool create_directories = true);

// `start` (and `snapshot restore`) of a sandbox whose mounts were recorded
// earlier: checks `recorded` again (recheck_mounts) under the mountPolicy of
// `profiles` (empty: env.default_profile). Throws agentctl::Error naming every
// refused mount.
void recheck_start_mounts(const std::string& name, const std::vector<std::string>& profiles,
                          const std::vector<Mount>& recorded, const Environment& env);

// `agentctl cp` with sandbox NAME: `path` checked by check_copy_path under the
// mountPolicy of `profiles` (empty: env.default_profile); the resolved path.
[[nodiscard]] std::string check_copy_host_path(const std::string& name, const std::vector<std::string>& profiles,
                                               const std::string& path, const Environment& env);

// The layering of two profile specs: `later` over `base`. Exposed for tests
// and `profile show`. See docs/profiles.md for the rule of every field.
[[nodiscard]] ProfileSpec merge_profile_specs(const ProfileSpec& base, const ProfileSpec& later);

}  // namespace agentctl::policy
