// Where profiles come from: the project, the user, the organisation and the
// built-ins, searched in that order. The organisation's profile of a name is a
// floor: a project or user profile of the same name is layered on top of it
// (and can only tighten it), never used instead of it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "policy/profile.hpp"

namespace agentctl::policy {

// The directories searched, and the facts the loader needs. Built by the CLI
// from the process environment with environment_from_process(); tests build
// it by hand.
struct Environment {
    std::string home;         // $HOME
    std::string cwd;          // the working directory
    std::string project_dir;  // CWD/.agentctl/profiles
    std::string user_dir;     // $XDG_CONFIG_HOME/agentctl/profiles or ~/.config/agentctl/profiles
    std::string org_dir;      // profileDir config key, AGENTCTL_ORG_DIR/profiles, or /etc/agentctl/profiles
    std::string config_dir;   // core::config_dir() (~/.config/agentctl), never mountable
    std::string state_dir;    // core::state_dir() (~/.local/state/agentctl), never mountable
    std::string runtime_dir;  // core::runtime_dir(), never mountable
    std::string default_profile = "default";  // the defaultProfile config key
};

// Reads $HOME, $XDG_CONFIG_HOME, $AGENTCTL_ORG_DIR and the working directory.
// `profile_dir_setting` is the profileDir config value or the --profile-dir
// flag (empty: not set); $AGENTCTL_ORG_DIR (a replacement for /etc/agentctl)
// wins over the setting when set. Throws agentctl::Error when $HOME is unset.
[[nodiscard]] Environment environment_from_process(const std::string& profile_dir_setting = {},
                                                   const std::string& default_profile = {});

// Profile names: [A-Za-z0-9][A-Za-z0-9._-]*, at most 64 characters.
[[nodiscard]] bool is_valid_profile_name(std::string_view name);

// The embedded YAML of a built-in profile (default, strict, terminal, gui).
[[nodiscard]] std::optional<std::string_view> builtin_profile_text(std::string_view name);
[[nodiscard]] std::vector<std::string> builtin_profile_names();

struct ProfileSummary {
    std::string name;
    std::string source;       // project | user | organisation | built-in
    std::string path;         // file, or "built-in:NAME"
    std::string description;  // metadata.description; "(invalid: ...)" when it does not load
    // true when a location earlier in the search order has a profile of this
    // name, so this one is not used (an organisation profile is never shadowed:
    // it is the floor under a same-named project or user profile)
    bool shadowed = false;
};

// `profile list`: every profile in every location, in search order, then by name.
[[nodiscard]] std::vector<ProfileSummary> list_profiles(const Environment& env);

// Finds NAME and returns it with its organisation floor applied (see above)
// and its allowFile merged in. Throws agentctl::Error when no location has it,
// or with every diagnostic when a file is invalid.
[[nodiscard]] Profile load_profile(const std::string& name, const Environment& env);

// `profile show NAME`: the loaded profile as data, for the CLI to print as
// JSON or YAML: {name, source, path, description, spec: {network: {denyLAN,
// allow: [{entry, origin}], allowPresets, presetRules: [...], ports, dns},
// resources, mounts, mountPolicy, console, packages, isolation}}.
[[nodiscard]] nlohmann::json profile_to_json(const Profile& profile);
// The same data rendered as YAML text.
[[nodiscard]] std::string profile_to_yaml(const Profile& profile);

// `profile presets` / `profile packages`: tables as text, and as JSON.
[[nodiscard]] std::string render_presets_table();
[[nodiscard]] nlohmann::json presets_to_json();
[[nodiscard]] std::string render_packages_table();
[[nodiscard]] nlohmann::json packages_to_json();
[[nodiscard]] std::string render_profile_list(const std::vector<ProfileSummary>& profiles);
[[nodiscard]] nlohmann::json profile_list_to_json(const std::vector<ProfileSummary>& profiles);

}  // namespace agentctl::policy
