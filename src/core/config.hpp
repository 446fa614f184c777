// agentctl's configuration: a few keys in YAML files, read from the
// organisation's file first and the user's file second.
//
// Every key is declared once in a table with its validator and its per-source
// policy: some keys, once the organisation's file sets them, cannot be changed
// by the user (the organisation's profile directory, for one). This file holds
// the generic keys; each provider declares its own (`incus.*`) in its registry
// entry, and the registry's config_keys() (provider.hpp) is the whole table a
// Config is loaded with.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "agentctl/config_key.hpp"

namespace agentctl::core {

// The keys that belong to no provider: profileDir, defaultProfile, baseProfile.
[[nodiscard]] std::span<const ConfigKey> generic_config_keys();

// A validator for keys that name a file or directory: absolute, or from `~`.
[[nodiscard]] std::string validate_path(std::string_view value);

struct ConfigPaths {
    std::filesystem::path user_file;   // $AGENTCTL_CONFIG or $XDG_CONFIG_HOME/agentctl/config.yaml
    std::filesystem::path org_file;    // /etc/agentctl/config.yaml ($AGENTCTL_ORG_DIR replaces /etc/agentctl)
    std::filesystem::path config_dir;  // core::config_dir(): config.yaml, user profiles (state: core::state_dir())
    std::filesystem::path org_dir;     // /etc/agentctl
};

// Resolves the paths from the environment (HOME, XDG_CONFIG_HOME, AGENTCTL_CONFIG, AGENTCTL_ORG_DIR).
[[nodiscard]] ConfigPaths config_paths_from_environment();

struct ConfigValue {
    std::string value;
    std::string source;  // "organisation (/etc/agentctl/config.yaml)", "user (...)", "default"
};

class Config {
public:
    // Loads both files against the table `keys` (which must outlive the
    // Config). A malformed file or an unknown key is an error naming the file,
    // line and key.
    static Config load(const ConfigPaths& paths, std::span<const ConfigKey> keys);

    // The key of that name in the table, or nullptr.
    [[nodiscard]] const ConfigKey* find_key(std::string_view name) const;
    [[nodiscard]] std::span<const ConfigKey> keys() const { return m_keys; }

    [[nodiscard]] std::optional<ConfigValue> get(std::string_view key) const;
    [[nodiscard]] std::string value_or(std::string_view key, std::string fallback) const;
    [[nodiscard]] const ConfigPaths& paths() const { return m_paths; }

    // Validates `key=value` against the table and the organisation's locks,
    // then rewrites the user's file atomically. On any error nothing changes.
    void set(std::string_view key, std::string_view value);

    // The same checks as set(), but only returns the user file's new content
    // (for --preview); nothing is written.
    [[nodiscard]] std::string plan_set(std::string_view key, std::string_view value) const;

private:
    std::span<const ConfigKey> m_keys;
    ConfigPaths m_paths;
    std::map<std::string, std::string, std::less<>> m_org;
    std::map<std::string, std::string, std::less<>> m_user;
};

}  // namespace agentctl::core
