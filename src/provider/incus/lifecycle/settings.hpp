// The Incus provider's configuration keys (`incus.*`): each with its
// validator, default and per-source policy, in one table that the registry
// lists with the provider (provider.hpp) and `agentctl config` reads and
// writes like its own keys. The provider reads them back from
// ProviderContext::settings with setting(), which falls back to the default
// declared here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "agentctl/config_key.hpp"
#include "agentctl/provider.hpp"

namespace agentctl::provider::incus {

namespace config_key {
inline constexpr std::string_view k_subnet_pool = "incus.subnetPool";
inline constexpr std::string_view k_subnet_prefix = "incus.subnetPrefix";
inline constexpr std::string_view k_storage_pool = "incus.storagePool";
inline constexpr std::string_view k_image = "incus.image";
inline constexpr std::string_view k_proxy_resolve_file = "incus.proxyResolveFile";
inline constexpr std::string_view k_proxy_upstream_ca = "incus.proxyUpstreamCA";
inline constexpr std::string_view k_remote = "incus.remote";
inline constexpr std::string_view k_project = "incus.project";
inline constexpr std::string_view k_proxy_placement = "incus.proxyPlacement";
inline constexpr std::string_view k_image_remote = "incus.imageRemote";
inline constexpr std::string_view k_proxy_max_tunnels = "incus.proxyMaxTunnels";
inline constexpr std::string_view k_host_memory = "incus.hostMemory";
inline constexpr std::string_view k_host_socket_memory = "incus.hostSocketMemory";
inline constexpr std::string_view k_host_processes = "incus.hostProcesses";
inline constexpr std::string_view k_pool_size = "incus.pool.size";
}  // namespace config_key

// The most entries incus.pool.size may ask for.
inline constexpr unsigned k_max_pool_size = 32;

// Every `incus.*` key, in display order.
[[nodiscard]] std::span<const ConfigKey> settings();

// The value of `key` (one of config_key::k_*) in the context's settings, or the
// table's default when it is unset or empty.
[[nodiscard]] std::string setting(const ProviderContext& context, std::string_view key);

// The number or size (parse_size: 256MiB, 1GiB, bytes) a limit key holds.
// Throws agentctl::Error naming the key for a value its validator refuses.
[[nodiscard]] std::uint64_t setting_amount(const ProviderContext& context, std::string_view key);

// The simplestreams server an incus.imageRemote value names: `images` (the
// name the incus client gives the community image server) is
// https://images.linuxcontainers.org; any other value must be the server's
// URL. Throws agentctl::Error for a value that is neither; the config key's
// validator applies the same rule.
[[nodiscard]] std::string image_server_url(std::string_view image_remote);

}  // namespace agentctl::provider::incus
