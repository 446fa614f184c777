// Where agentctl keeps its files, following the XDG base directory spec:
//
//   config   $XDG_CONFIG_HOME/agentctl  (~/.config/agentctl)       config.yaml, profiles/
//   state    $XDG_STATE_HOME/agentctl   (~/.local/state/agentctl)  per-sandbox state, logs
//   runtime  $XDG_RUNTIME_DIR/agentctl  (else STATE/run)           locks, pid files
//
// A variable that is unset, empty or not an absolute path is ignored, as the
// spec says. Each function is the only place its directory is decided.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::core {

// Reads an environment variable (nullptr when unset); tests pass their own.
using GetEnv = std::function<const char*(const char*)>;

[[nodiscard]] std::filesystem::path config_dir(const GetEnv& getenv = {});
[[nodiscard]] std::filesystem::path state_dir(const GetEnv& getenv = {});
[[nodiscard]] std::filesystem::path runtime_dir(const GetEnv& getenv = {});

// Creates `dir` (and its parents) and makes `dir` itself mode 0700 and owned by
// this user; refuses a symlink or a directory someone else owns. Returns `dir`.
const std::filesystem::path& ensure_private_dir(const std::filesystem::path& dir);

// Versions before the XDG layout kept state below the config directory. Moves
// each of those entries (lima/, incus/, locks/ are dropped: they are transient)
// to the state directory when the state directory has no entry of that name.
// Each move is one rename (or copy-then-rename across file systems), so a
// second run, or two processes at once, find nothing left to do. Returns the
// names moved, for a notice.
std::vector<std::string> migrate_state(const std::filesystem::path& old_config_dir,
                                       const std::filesystem::path& new_state_dir);

}  // namespace agentctl::core
