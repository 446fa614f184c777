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

std::string validate_provider(std::string_view value) {
    if (value == "incus" || value == "lima" || value == "hyperv") return {};
    return fmt::format("provider must be one of incus, lima, hyperv (got '{}')", value);
}

std::string validate_path(std::string_view value) {
    if (value.empty()) return "must not be empty";
    if (value.front() != '/' && value.front() != '~') return fmt::format("must be an absolute path (got '{}')", value);
    return {};
}

std::string validate_profile_name(std::string_view value) {
    const bool ok = !value.empty() && std::all_of(value.begin(), value.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '-' || c == '_' || c == '.';
    });
    if (ok && value.front() != '.') return {};
    return fmt::format("must be a profile name of letters, digits, '-', '_' and '.' (got '{}')", value);
}

std::string validate_cidr(std::string_view value) {
    auto slash = value.find('/');
    if (slash == std::string_view::npos)
        return fmt::format("must be an IPv4 CIDR such as 10.213.0.0/16 (got '{}')", value);
    int octets = 0;
    int current = -1;
    for (char c : value.substr(0, slash)) {
        if (c == '.') {
            if (current < 0 || current > 255) return fmt::format("'{}' is not an IPv4 network", value);
            ++octets;
            current = -1;
        } else if (c >= '0' && c <= '9') {
            current = (current < 0 ? 0 : current * 10) + (c - '0');
            if (current > 255) return fmt::format("'{}' is not an IPv4 network", value);
        } else {
            return fmt::format("'{}' is not an IPv4 network", value);
        }
    }
    auto prefix = value.substr(slash + 1);
    int bits = prefix.empty() ? -1 : 0;
    for (char c : prefix) bits = (c >= '0' && c <= '9' && bits >= 0) ? bits * 10 + (c - '0') : -1;
    if (octets != 3 || current < 0 || bits < 8 || bits > 24) {
        return fmt::format("must be an IPv4 CIDR with a prefix from /8 to /24 (got '{}')", value);
    }
    return {};
}

std::string validate_remote(std::string_view value) {
    if (value.empty() || value.find_first_of(" \t\n/") != std::string_view::npos) {
        return fmt::format("must be an Incus remote name such as 'images' (got '{}')", value);
    }
    return {};
}

// A remote of the incus client's config.yml, as `incus remote add NAME` takes
// it: `NAME:` prefixes instance names, so no ':' (nor '/', spaces or a leading '-').
std::string validate_remote_name(std::string_view value) {
    const bool ok = !value.empty() && value.size() <= 255 && value.front() != '-' &&
                    value.find_first_of(": \t\n/\\") == std::string_view::npos;
    if (ok) return {};
    return fmt::format("must be the name of a remote of the incus client, as `incus remote list` shows it (got '{}')",
                       value);
}

std::string validate_prefix(std::string_view value) {
    int bits = value.empty() || value.size() > 2 ? -1 : 0;
    for (char c : value) bits = (bits >= 0 && c >= '0' && c <= '9') ? bits * 10 + (c - '0') : -1;
    if (bits >= 16 && bits <= 29) return {};
    return fmt::format("must be a prefix length from 16 to 29 (got '{}')", value);
}

std::string validate_image(std::string_view value) {
    const bool ok =
        !value.empty() && value.size() <= 255 && std::all_of(value.begin(), value.end(), [](unsigned char c) {
            return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/' || c == ':';
        });
    return ok ? std::string()
              : fmt::format("must be an image alias or fingerprint such as agentctl-debian-12 (got '{}')", value);
}

std::string validate_pool_name(std::string_view value) {
    const bool ok = !value.empty() && std::all_of(value.begin(), value.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '-' || c == '_' || c == '.';
    });
    return ok ? std::string() : fmt::format("must be an Incus storage pool name (got '{}')", value);
}

std::string validate_proxy_placement(std::string_view value) {
    return value == "auto" || value == "host" || value == "instance"
               ? std::string()
               : fmt::format("must be auto, host or instance (got '{}')", value);
}

constexpr std::array k_keys{
    ConfigKey{"provider", "the backend used when --provider is not given (incus, lima, hyperv)", "",
              KeyPolicy::UserMayOverride, &validate_provider},
    ConfigKey{"profileDir", "the organisation's profile directory", "/etc/agentctl/profiles", KeyPolicy::OrgLocks,
              &validate_path},
    ConfigKey{"defaultProfile", "the profile used when create is given no --profile", "default",
              KeyPolicy::UserMayOverride, &validate_profile_name},
    ConfigKey{"baseProfile", "a profile applied first to every sandbox, as a floor (organisation only)", "",
              KeyPolicy::OrgOnly, &validate_profile_name},
    ConfigKey{"incus.subnetPool", "the IPv4 range sandbox bridges take their subnets from", "10.213.0.0/16",
              KeyPolicy::UserMayOverride, &validate_cidr},
    ConfigKey{"incus.subnetPrefix", "the prefix length of each sandbox bridge's subnet", "28",
              KeyPolicy::UserMayOverride, &validate_prefix},
    ConfigKey{"incus.storagePool", "the Incus storage pool sandboxes' root disks live in", "default",
              KeyPolicy::UserMayOverride, &validate_pool_name},
    ConfigKey{"incus.image", "the image a sandbox starts from when create is given no --image (build it: image build)",
              "agentctl-debian-12", KeyPolicy::UserMayOverride, &validate_image},
    ConfigKey{"incus.proxyResolveFile",
              "an /etc/hosts-format file each Incus sandbox's egress proxy consults before DNS (addresses are "
              "still vetted by the policy)",
              "", KeyPolicy::UserMayOverride, &validate_path},
    ConfigKey{"incus.remote",
              "the incus client's remote (incus remote list) whose server holds the sandboxes, over HTTPS; unset: "
              "the local daemon's unix socket (--remote overrides it)",
              "", KeyPolicy::UserMayOverride, &validate_remote_name},
    ConfigKey{"incus.proxyPlacement",
              "where each Incus sandbox's egress proxy runs: auto (the host when the Incus server is this machine), "
              "host, or instance (a small companion container on the sandbox's bridge)",
              "auto", KeyPolicy::UserMayOverride, &validate_proxy_placement},
    ConfigKey{"incus.imageRemote", "the Incus remote that `image pull` copies from", "images", KeyPolicy::OrgLocks,
              &validate_remote},
};

std::map<std::string, std::string, std::less<>> load_file(const std::filesystem::path& path) {
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
        const auto* spec = find_config_key(key);
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

std::span<const ConfigKey> config_keys() { return k_keys; }

const ConfigKey* find_config_key(std::string_view name) {
    auto it = std::find_if(k_keys.begin(), k_keys.end(), [&](const auto& k) { return k.name == name; });
    return it == k_keys.end() ? nullptr : &*it;
}

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

Config Config::load(const ConfigPaths& paths) {
    Config config;
    config.m_paths = paths;
    config.m_org = load_file(paths.org_file);
    config.m_user = load_file(paths.user_file);
    for (const auto& [key, value] : config.m_user) {
        const auto* spec = find_config_key(key);
        if (spec->policy == KeyPolicy::OrgOnly) {
            throw Error(fmt::format("{}: key '{}' may only be set in the organisation's configuration ({})",
                                    paths.user_file.string(), key, paths.org_file.string()),
                        fmt::format("remove '{}' from {}", key, paths.user_file.string()));
        }
    }
    return config;
}

std::optional<ConfigValue> Config::get(std::string_view key) const {
    const auto* spec = find_config_key(key);
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
    const auto* spec = find_config_key(key);
    if (spec == nullptr) {
        std::string known;
        for (const auto& k : k_keys) known += (known.empty() ? "" : ", ") + std::string(k.name);
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
