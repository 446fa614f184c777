#include "core/config.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "core/paths.hpp"

namespace agentctl::core {
namespace {

std::string validate_profile_name(std::string_view value) {
    const bool ok = !value.empty() && std::all_of(value.begin(), value.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '-' || c == '_' || c == '.';
    });
    if (ok && value.front() != '.') return {};
    return fmt::format("must be a profile name of letters, digits, '-', '_' and '.' (got '{}')", value);
}

constexpr std::array k_keys{
    ConfigKey{"profileDir", "the organisation's profile directory", "/etc/agentctl/profiles", KeyPolicy::OrgLocks,
              &validate_path},
    ConfigKey{"defaultProfile", "the profile used when create is given no --profile", "default",
              KeyPolicy::UserMayOverride, &validate_profile_name},
    ConfigKey{"baseProfile", "a profile applied first to every sandbox, as a floor (organisation only)", "",
              KeyPolicy::OrgOnly, &validate_profile_name},
};

const ConfigKey* find_in(std::span<const ConfigKey> keys, std::string_view name) {
    auto it = std::find_if(keys.begin(), keys.end(), [&](const auto& k) { return k.name == name; });
    return it == keys.end() ? nullptr : &*it;
}

std::map<std::string, std::string, std::less<>> load_file(const std::filesystem::path& path,
                                                          std::span<const ConfigKey> keys) {
    std::map<std::string, std::string, std::less<>> values;
    auto text = read_file_if_exists(path);
    if (!text) return values;
    YAML::Node root;
    try {
        root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
        throw Error(fmt::format("{}:{}:{}: {}", path.string(), e.mark.line + 1, e.mark.column + 1, e.msg),
                    "fix the YAML syntax or remove the file");
    }
    if (!root || root.IsNull()) return values;
    if (!root.IsMap()) {
        throw Error(fmt::format("{}:{}:{}: the configuration must be a mapping of key: value", path.string(),
                                root.Mark().line + 1, root.Mark().column + 1));
    }
    for (const auto& entry : root) {
        auto key = entry.first.as<std::string>();
        const auto mark = entry.first.Mark();
        const auto where = fmt::format("{}:{}:{}", path.string(), mark.line + 1, mark.column + 1);
        const auto* spec = find_in(keys, key);
        if (spec == nullptr) throw Error(fmt::format("{}: unknown key '{}'", where, key), "see `agentctl config get`");
        if (!entry.second.IsScalar()) throw Error(fmt::format("{}: key '{}' must be a single value", where, key));
        auto value = entry.second.as<std::string>();
        if (auto problem = spec->validate(value); !problem.empty()) {
            throw Error(fmt::format("{}: key '{}': {}", where, key, problem));
        }
        values[key] = value;
    }
    return values;
}

}  // namespace

std::string validate_path(std::string_view value) {
    if (value.empty()) return "must not be empty";
    if (value.front() != '/' && value.front() != '~') return fmt::format("must be an absolute path (got '{}')", value);
    return {};
}

std::span<const ConfigKey> generic_config_keys() { return k_keys; }

const ConfigKey* Config::find_key(std::string_view name) const { return find_in(m_keys, name); }

ConfigPaths config_paths_from_environment() {
    ConfigPaths paths;
    paths.config_dir = config_dir();
    const char* explicit_file = std::getenv("AGENTCTL_CONFIG");
    paths.user_file = (explicit_file != nullptr && *explicit_file != '\0') ? std::filesystem::path(explicit_file)
                                                                           : paths.config_dir / "config.yaml";
    const char* org = std::getenv("AGENTCTL_ORG_DIR");
    paths.org_dir =
        (org != nullptr && *org != '\0') ? std::filesystem::path(org) : std::filesystem::path("/etc/agentctl");
    paths.org_file = paths.org_dir / "config.yaml";
    return paths;
}

Config Config::load(const ConfigPaths& paths, std::span<const ConfigKey> keys) {
    Config config;
    config.m_keys = keys;
    config.m_paths = paths;
    config.m_org = load_file(paths.org_file, keys);
    config.m_user = load_file(paths.user_file, keys);
    for (const auto& [key, value] : config.m_user) {
        const auto* spec = config.find_key(key);
        if (spec->policy == KeyPolicy::OrgOnly) {
            throw Error(fmt::format("{}: key '{}' may only be set in the organisation's configuration ({})",
                                    paths.user_file.string(), key, paths.org_file.string()),
                        fmt::format("remove '{}' from {}", key, paths.user_file.string()));
        }
    }
    return config;
}

std::optional<ConfigValue> Config::get(std::string_view key) const {
    const auto* spec = find_key(key);
    if (spec == nullptr) return std::nullopt;
    auto org = m_org.find(key);
    auto user = m_user.find(key);
    const bool org_wins = org != m_org.end() && (spec->policy != KeyPolicy::UserMayOverride || user == m_user.end());
    if (org_wins) return ConfigValue{org->second, "organisation (" + m_paths.org_file.string() + ")"};
    if (user != m_user.end()) return ConfigValue{user->second, "user (" + m_paths.user_file.string() + ")"};
    if (!spec->default_value.empty()) return ConfigValue{std::string(spec->default_value), "default"};
    return std::nullopt;
}

std::string Config::value_or(std::string_view key, std::string fallback) const {
    auto value = get(key);
    return value ? value->value : std::move(fallback);
}

std::string Config::plan_set(std::string_view key, std::string_view value) const {
    const auto* spec = find_key(key);
    if (spec == nullptr) {
        std::string known;
        for (const auto& k : m_keys) known += (known.empty() ? "" : ", ") + std::string(k.name);
        throw Error(fmt::format("unknown configuration key '{}'", key), "known keys: " + known);
    }
    if (auto problem = spec->validate(value); !problem.empty()) {
        throw Error(fmt::format("invalid value for {}: {}", key, problem));
    }
    if (spec->policy == KeyPolicy::OrgOnly) {
        throw Error(fmt::format("{} may only be set by the organisation, in {}", key, m_paths.org_file.string()));
    }
    if (spec->policy == KeyPolicy::OrgLocks && m_org.contains(key)) {
        throw Error(
            fmt::format("{} is set by the organisation in {} and cannot be changed", key, m_paths.org_file.string()),
            "ask whoever manages " + m_paths.org_dir.string() + " to change it");
    }
    auto updated = m_user;
    updated[std::string(key)] = std::string(value);
    YAML::Emitter out;
    out << YAML::BeginMap;
    for (const auto& [k, v] : updated) out << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

void Config::set(std::string_view key, std::string_view value) {
    write_file_atomic(m_paths.user_file, plan_set(key, value), 0644);
    m_user[std::string(key)] = std::string(value);
}

}  // namespace agentctl::core
