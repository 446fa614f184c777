#include "provider/incus/lifecycle/settings.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/config.hpp"
#include "policy/units.hpp"

namespace agentctl::provider::incus {
namespace {

constexpr std::string_view k_default_pool = "10.213.0.0/16";
constexpr std::string_view k_community_images = "https://images.linuxcontainers.org";

std::string validate_cidr(std::string_view value) {
    auto slash = value.find('/');
    if (slash == std::string_view::npos) {
        return fmt::format("must be an IPv4 CIDR such as {} (got '{}')", k_default_pool, value);
    }
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

std::string validate_prefix(std::string_view value) {
    int bits = value.empty() || value.size() > 2 ? -1 : 0;
    for (char c : value) bits = (bits >= 0 && c >= '0' && c <= '9') ? bits * 10 + (c - '0') : -1;
    if (bits >= 16 && bits <= 29) return {};
    return fmt::format("must be a prefix length from 16 to 29 (got '{}')", value);
}

std::string validate_pool_name(std::string_view value) {
    const bool ok = !value.empty() && std::all_of(value.begin(), value.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '-' || c == '_' || c == '.';
    });
    return ok ? std::string() : fmt::format("must be an Incus storage pool name (got '{}')", value);
}

std::string validate_image(std::string_view value) {
    const bool ok =
        !value.empty() && value.size() <= 255 && std::all_of(value.begin(), value.end(), [](unsigned char c) {
            return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/' || c == ':';
        });
    return ok ? std::string()
              : fmt::format("must be an image alias or fingerprint such as agentctl-debian-12 (got '{}')", value);
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

// An Incus project name, as `incus project create NAME` takes it (no '/', spaces
// or a leading '-'); Incus's own default project is `default`.
std::string validate_project_name(std::string_view value) {
    const bool ok = !value.empty() && value.size() <= 63 && value.front() != '-' &&
                    std::all_of(value.begin(), value.end(),
                                [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
    if (ok) return {};
    return fmt::format("must be the name of an Incus project, as `incus project list` shows it (got '{}')", value);
}

std::string validate_proxy_placement(std::string_view value) {
    return value == "auto" || value == "host" || value == "instance"
               ? std::string()
               : fmt::format("must be auto, host or instance (got '{}')", value);
}

// `images`, or a simplestreams server's URL (SCHEME://HOST...).
std::string validate_image_remote(std::string_view value) {
    if (value == "images") return {};
    const auto scheme_end = value.find("://");
    const bool url = scheme_end != std::string_view::npos && scheme_end > 0 && scheme_end + 3 < value.size() &&
                     value.find_first_of(" \t\n") == std::string_view::npos;
    if (url) return {};
    return fmt::format("must be `images` or the URL of a simplestreams server, such as {} (got '{}')",
                       k_community_images, value);
}

std::string validate_count(std::string_view value) {
    std::uint64_t number = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (!value.empty() && ec == std::errc() && end == value.data() + value.size() && number > 0 &&
        number <= 1'000'000) {
        return {};
    }
    return fmt::format("must be a whole number from 1 to 1000000 (got '{}')", value);
}

std::string validate_pool_size(std::string_view value) {
    unsigned number = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (!value.empty() && ec == std::errc() && end == value.data() + value.size() && number <= k_max_pool_size) {
        return {};
    }
    return fmt::format("must be a whole number from 0 to {} (got '{}')", k_max_pool_size, value);
}

std::string validate_amount_of_memory(std::string_view value) {
    const auto bytes = policy::parse_size(value);
    if (bytes && *bytes >= 4 * 1024 * 1024) return {};
    return fmt::format("must be a size of at least 4MiB, such as 256MiB or 1GiB (got '{}')", value);
}

constexpr std::array k_settings{
    ConfigKey{config_key::k_subnet_pool, "the IPv4 range sandbox bridges take their subnets from", k_default_pool,
              KeyPolicy::UserMayOverride, &validate_cidr},
    ConfigKey{config_key::k_subnet_prefix, "the prefix length of each sandbox bridge's subnet", "28",
              KeyPolicy::UserMayOverride, &validate_prefix},
    ConfigKey{config_key::k_storage_pool, "the Incus storage pool sandboxes' root disks live in", "default",
              KeyPolicy::UserMayOverride, &validate_pool_name},
    ConfigKey{config_key::k_image,
              "the image a sandbox starts from when create is given no --image (build it: image build)",
              "agentctl-debian-12", KeyPolicy::UserMayOverride, &validate_image},
    ConfigKey{config_key::k_proxy_resolve_file,
              "an /etc/hosts-format file each Incus sandbox's egress proxy consults before DNS (addresses are "
              "still vetted by the policy)",
              "", KeyPolicy::UserMayOverride, &core::validate_path},
    ConfigKey{config_key::k_proxy_upstream_ca,
              "for test origins only: a CA file each Incus sandbox's egress proxy trusts besides the system's, for "
              "the hosts it terminates TLS for to inject secrets (unset: the system's trust store only)",
              "", KeyPolicy::UserMayOverride, &core::validate_path},
    ConfigKey{config_key::k_remote,
              "the incus client's remote (incus remote list) whose server holds the sandboxes, over HTTPS; unset: "
              "the local daemon's unix socket (--remote overrides it)",
              "", KeyPolicy::UserMayOverride, &validate_remote_name},
    ConfigKey{config_key::k_project,
              "the Incus project that holds the sandboxes, their images and profiles; unset: $INCUS_PROJECT, else the "
              "remote's project, else `default` (--project overrides it)",
              "", KeyPolicy::UserMayOverride, &validate_project_name},
    ConfigKey{config_key::k_proxy_placement,
              "where each Incus sandbox's egress proxy runs: auto (the host when the Incus server is this machine), "
              "host, or instance (a small companion container on the sandbox's bridge)",
              "auto", KeyPolicy::UserMayOverride, &validate_proxy_placement},
    ConfigKey{config_key::k_image_remote,
              "the simplestreams server `image pull` copies from: images (the community server) or its URL", "images",
              KeyPolicy::OrgLocks, &validate_image_remote},
    ConfigKey{config_key::k_proxy_max_tunnels,
              "connections each Incus sandbox's egress proxy holds open to destinations at once; more are answered "
              "503 tunnel-limit (taken when the proxy next starts)",
              "256", KeyPolicy::OrgLocks, &validate_count},
    ConfigKey{config_key::k_host_memory,
              "memory the host processes of one Incus sandbox (its egress proxy and resolver) may use together, in "
              "their cgroup (cgroup v2: socket memory included)",
              "256MiB", KeyPolicy::OrgLocks, &validate_amount_of_memory},
    ConfigKey{config_key::k_host_socket_memory,
              "TCP socket memory the host processes of one Incus sandbox may hold together (cgroup v1; v2 counts it "
              "in incus.hostMemory)",
              "128MiB", KeyPolicy::OrgLocks, &validate_amount_of_memory},
    ConfigKey{config_key::k_host_processes,
              "processes and threads the host processes of one Incus sandbox may run together", "64",
              KeyPolicy::OrgLocks, &validate_count},
    ConfigKey{config_key::k_pool_size,
              "Incus sandboxes kept made ahead of time (deny-all, hidden), that a create taking the default image "
              "and --isolation container --mount-none takes at once; 0: none (agentctl pool)",
              "0", KeyPolicy::UserMayOverride, &validate_pool_size},
};

}  // namespace

std::span<const ConfigKey> settings() { return k_settings; }

std::string setting(const ProviderContext& context, std::string_view key) {
    auto it = context.settings.find(std::string(key));
    if (it != context.settings.end() && !it->second.empty()) return it->second;
    auto spec = std::find_if(k_settings.begin(), k_settings.end(), [&](const auto& k) { return k.name == key; });
    if (spec == k_settings.end()) throw Error(fmt::format("internal error: {} is not an Incus setting", key));
    return std::string(spec->default_value);
}

std::uint64_t setting_amount(const ProviderContext& context, std::string_view key) {
    const auto value = setting(context, key);
    auto spec = std::find_if(k_settings.begin(), k_settings.end(), [&](const auto& k) { return k.name == key; });
    if (auto problem = spec->validate(value); !problem.empty()) {
        throw Error(fmt::format("setting {}: {}", key, problem),
                    fmt::format("agentctl config set {}={}", key, spec->default_value));
    }
    if (spec->validate == &validate_count || spec->validate == &validate_pool_size) return std::stoull(value);
    return *policy::parse_size(value);
}

std::string image_server_url(std::string_view image_remote) {
    if (auto problem = validate_image_remote(image_remote); !problem.empty()) {
        throw Error(fmt::format("setting {}: {}", config_key::k_image_remote, problem),
                    fmt::format("set the simplestreams server's URL: agentctl config set {}=https://HOST",
                                config_key::k_image_remote));
    }
    return image_remote == "images" ? std::string(k_community_images) : std::string(image_remote);
}

}  // namespace agentctl::provider::incus
