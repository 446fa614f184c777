// Mount resolution: from what a profile or --mount names to a checked,
// canonical host path. Every check runs on the path with symlinks resolved.
#pragma once

#include <string>
#include <vector>

#include "agentctl/error.hpp"
#include "agentctl/sandbox.hpp"
#include "policy/paths.hpp"
#include "policy/profile.hpp"

namespace agentctl::policy {

struct MountRequest {
    std::string host_path;   // may start with ~ and contain {{.Name}}
    std::string guest_path;  // empty: the expanded host path
    bool writable = false;
    std::string origin;  // "--mount", "profile default (FILE:LINE)"
};

struct MountContext {
    std::string name;        // the sandbox, for {{.Name}}
    std::string home;        // $HOME
    std::string cwd;         // relative host paths are taken from here
    std::string config_dir;  // agentctl's own config/state dir: never mountable
    MountPolicy policy;
    // false: resolve and check as if missing directories had been created, but
    // create nothing (for --preview, and for checks that must precede the
    // capability gate). The paths returned are the ones creation would give.
    bool create_directories = true;
    // agentctl's state and runtime directories (core::state_dir/runtime_dir): never mountable.
    std::vector<std::string> private_dirs;
};

// The owner agentctl gives a directory it creates for a writable mount
// (createMissing): whoever ran agentctl (SUDO_UID/SUDO_GID under sudo), and
// never root: when that is root, k_unprivileged_owner_id. Host root is never
// mapped into a sandbox, so a root-owned workspace could not be handed to the
// sandbox user at all.
inline constexpr int k_unprivileged_owner_id = 1500;
struct DirectoryOwner {
    int uid = k_unprivileged_owner_id;
    int gid = k_unprivileged_owner_id;
};
[[nodiscard]] DirectoryOwner created_directory_owner();

// The fixed deny list under `home` plus Incus's state directories,
// `config_dir` and `private_dirs`, in display order.
[[nodiscard]] std::vector<std::string> builtin_denied_paths(const std::string& home, const std::string& config_dir,
                                                            const std::vector<std::string>& private_dirs = {});

// `--mount host[:guest][:w|:ro]` -> request (origin "--mount"). Throws
// agentctl::Error naming the flag value.
[[nodiscard]] MountRequest parse_mount_flag(std::string_view text);

struct MountLayering {
    std::vector<MountRequest> requests;  // earlier mounts not replaced, then the added ones
    std::vector<std::string> notices;    // one sentence per replaced mount
};

// Adds `added` (the --mount flags) to `earlier` (a profile's mounts, or a
// sandbox's current set at start). A flag whose guest path is exactly the
// guest path of an earlier mount replaces that mount (the documented
// `--mount ~/src/app:/workspace:w` over the default profile's /workspace) and
// says so in a notice; any other overlap is left for resolve_mounts to refuse.
// `name` fills {{.Name}} for the comparison.
[[nodiscard]] MountLayering layer_mount_flags(std::vector<MountRequest> earlier, const std::vector<MountRequest>& added,
                                              const std::string& name);

// Resolves every request in order: expand ~ and {{.Name}} -> absolute, clean
// -> (checks on the existing part) -> create if createMissing -> resolve
// symlinks -> refuse / and $HOME itself unless allowHome -> built-in deny list
// (is, inside, or contains) -> denyPaths -> allowedRoots (by path segment) ->
// guest path not a system directory -> no overlapping host or guest paths.
// Collects every problem and throws agentctl::Error listing them all; creates
// directories only after every request passed its checks.
[[nodiscard]] std::vector<Mount> resolve_mounts(const std::vector<MountRequest>& requests, const MountContext& context);

// The check before a recorded mount set is used again (start, snapshot
// restore): every recorded host path must still resolve (symlinks followed the
// way the kernel and Incus follow them) to exactly the recorded path, be an
// existing directory, and pass the same checks resolve_mounts applies (the
// same Checker: /, $HOME, the built-in deny list, denyPaths, allowedRoots,
// overlaps). A path that now resolves elsewhere is refused naming both paths.
// Creates nothing. Throws agentctl::Error listing every problem.
void recheck_mounts(const std::vector<Mount>& recorded, const MountContext& context);

// `agentctl cp`'s host side: `path` (~ expanded, relative to context.cwd) with
// its symlinks resolved the way the kernel follows them, refused by the rules
// a mount is (/, $HOME itself, the built-in deny list, denyPaths,
// allowedRoots; being inside or containing a refused path). Returns the
// resolved path, the only one to use from then on. Throws agentctl::Error
// naming the path and the rule.
[[nodiscard]] std::string check_copy_path(const std::string& path, const MountContext& context);

}  // namespace agentctl::policy
