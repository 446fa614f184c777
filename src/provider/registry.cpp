// The one table of compiled-in providers, and the configuration keys it
// brings together: the generic ones and each provider's own.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "agentctl/provider.hpp"
#include "core/config.hpp"
#include "provider/hyperv/hyperv_provider.hpp"
#include "provider/incus/lifecycle/incus_provider.hpp"
#include "provider/incus/lifecycle/settings.hpp"
#include "provider/lima/lima_provider.hpp"

namespace agentctl {
namespace {

constexpr std::array k_providers{
    ProviderEntry{
        .name = "incus",
        .title = "Incus",
        .description = "Incus virtual machines on Linux, each behind its own bridge and egress proxy",
        .capabilities = &provider::incus::capabilities,
        .create = &provider::incus::create,
        .egress = "agentctl's egress proxy on the sandbox's own bridge, deciding each connection by name and "
                  "resolved address; IP-literal entries are direct rules of the bridge's ACL",
        .settings = &provider::incus::settings,
        .remote_setting = provider::incus::config_key::k_remote,
        .project_setting = provider::incus::config_key::k_project,
    },
    ProviderEntry{
        .name = "lima",
        .title = "Lima",
        .description = "Lima virtual machines on macOS, confined by sandbox-exec and an egress proxy",
        .capabilities = &provider::lima::capabilities,
        .create = &provider::lima::create,
        .egress = "agentctl's egress proxy, deciding each connection by name and resolved address; sandbox-exec "
                  "keeps the VM from going around it",
    },
    ProviderEntry{
        .name = "hyperv",
        .title = "Hyper-V",
        .description = "Hyper-V on Windows (not implemented yet: every feature is gated)",
        .capabilities = &provider::hyperv::capabilities,
        .create = &provider::hyperv::create,
        .egress = "nothing yet: the Hyper-V provider cannot enforce a network policy",
    },
};

std::string validate_provider(std::string_view value) {
    if (find_provider(value) != nullptr) return {};
    return fmt::format("provider must be one of {} (got '{}')", provider_names(", "), value);
}

std::vector<ConfigKey> all_config_keys() {
    static const std::string provider_description =
        fmt::format("the backend used when --provider is not given ({})", provider_names(", "));
    std::vector<ConfigKey> keys{
        ConfigKey{"provider", provider_description, "", KeyPolicy::UserMayOverride, &validate_provider}};
    const auto generic = core::generic_config_keys();
    keys.insert(keys.end(), generic.begin(), generic.end());
    for (const auto& entry : k_providers) {
        if (entry.settings == nullptr) continue;
        const auto own = entry.settings();
        keys.insert(keys.end(), own.begin(), own.end());
    }
    return keys;
}

}  // namespace

std::span<const ProviderEntry> providers() { return k_providers; }

std::string provider_names(std::string_view separator) {
    std::string out;
    for (const auto& entry : k_providers) {
        if (!out.empty()) out += separator;
        out += entry.name;
    }
    return out;
}

const ProviderEntry* find_provider(std::string_view name) {
    auto it = std::find_if(k_providers.begin(), k_providers.end(), [&](const auto& p) { return p.name == name; });
    return it == k_providers.end() ? nullptr : &*it;
}

const ProviderEntry* remote_provider() {
    auto it =
        std::find_if(k_providers.begin(), k_providers.end(), [](const auto& p) { return !p.remote_setting.empty(); });
    return it == k_providers.end() ? nullptr : &*it;
}

std::span<const ConfigKey> config_keys() {
    static const std::vector<ConfigKey> keys = all_config_keys();
    return keys;
}

const ConfigKey* find_config_key(std::string_view name) {
    const auto keys = config_keys();
    auto it = std::find_if(keys.begin(), keys.end(), [&](const auto& k) { return k.name == name; });
    return it == keys.end() ? nullptr : &*it;
}

}  // namespace agentctl
