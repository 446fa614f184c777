// Built-in tables: allow presets, agents (`--agent NAME`) and the package
// catalog that maps neutral package names to apt/dnf/apk names.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentctl/policy.hpp"

namespace agentctl::policy {

struct Preset {
    std::string_view name;
    std::string_view description;
    std::span<const std::string_view> hosts;
    std::span<const std::uint16_t> ports;  // every host gets these ports
};

// Every preset, in display order (apt, apk, pypi, npm, github, gitlab).
[[nodiscard]] std::span<const Preset> presets();
[[nodiscard]] const Preset* find_preset(std::string_view name);

// The preset as allow rules, each with origin "preset NAME". Throws
// agentctl::Error naming the unknown preset (and listing the known ones).
[[nodiscard]] std::vector<AllowRule> expand_preset(std::string_view name);

// `--allow-preset a,b` (repeatable): the names in order, duplicates dropped.
// Throws agentctl::Error for an empty or unknown name.
[[nodiscard]] std::vector<std::string> preset_names(std::span<const std::string> comma_lists);

// `--allow-preset a,b` (repeatable): every name expanded, duplicates dropped.
[[nodiscard]] std::vector<AllowRule> expand_presets(std::span<const std::string> comma_lists);

struct Agent {
    std::string_view name;
    std::string_view install_command;         // run as the sandbox user by bash with pipefail
    std::string_view key_env;                 // API-key variable; empty when none
    std::span<const std::string_view> hosts;  // each allowed on port 443
    // How it is installed and found: the commands the installer runs (each a
    // neutral package of the same name, except node: nodejs), the command it
    // installs, and the directory below the user's home where the vendor's
    // installer puts that command when not on the sandbox's PATH (empty: on it).
    std::span<const std::string_view> needs;
    std::string_view binary;
    std::string_view home_bin;
};

[[nodiscard]] std::span<const Agent> agents();
// Throws agentctl::Error naming the unknown agent (and listing the known ones).
[[nodiscard]] const Agent& find_agent(std::string_view name);
// The agent's hosts as allow rules on port 443, origin "agent NAME".
[[nodiscard]] std::vector<AllowRule> agent_rules(const Agent& agent);
// The neutral package that brings the command `tool` (node: nodejs).
[[nodiscard]] std::string_view package_of_tool(std::string_view tool);

// A credential the catalog knows: the secret of that name (`agentctl secret
// set NAME`) is injected by the egress proxy into requests to these hosts, in
// this header, and the guest's variable `env` holds its placeholder.
struct CredentialHost {
    std::string_view host;    // port 443
    std::string_view header;  // lower case; the value may be Bearer, token or Basic credentials
};

struct Credential {
    std::string_view name;  // the secret's name
    std::string_view env;   // the guest variable that holds the placeholder
    std::span<const CredentialHost> hosts;
    std::span<const std::string_view> agents;  // agents (`--agent`) that use it when it is stored
};

[[nodiscard]] std::span<const Credential> credentials();
[[nodiscard]] const Credential* find_credential(std::string_view name);
// The credential `--agent NAME` uses; nullptr when none.
[[nodiscard]] const Credential* credential_for_agent(std::string_view agent);

enum class PackageManager { Apt, Dnf, Apk };

struct PackageEntry {
    std::string_view name;  // neutral name
    std::string_view apt;   // space-separated when one name maps to several
    std::string_view dnf;
    std::string_view apk;
};

[[nodiscard]] std::span<const PackageEntry> package_catalog();

// True when `name` matches [A-Za-z0-9][A-Za-z0-9._+-]* (at most 128 chars).
[[nodiscard]] bool is_valid_package_name(std::string_view name);
// Throws agentctl::Error "invalid package name ..." for a bad name.
void check_package_name(std::string_view name);

// The distribution package names for a neutral name; a name the catalog does
// not know is passed through unchanged.
[[nodiscard]] std::vector<std::string> package_names_for(std::string_view name, PackageManager manager);

}  // namespace agentctl::policy
