// The one table of compiled-in providers.
#include <algorithm>
#include <array>
#include <string>

#include "agentctl/provider.hpp"
#include "provider/hyperv/hyperv_provider.hpp"
#include "provider/incus/incus_provider.hpp"
#include "provider/lima/lima_provider.hpp"

namespace agentctl {
namespace {

constexpr std::array k_providers{
    ProviderEntry{"incus", "Incus virtual machines on Linux, each behind its own bridge and egress proxy",
                  &provider::incus::capabilities, &provider::incus::create,
                  "agentctl's egress proxy on the sandbox's own bridge, deciding each connection by name and "
                  "resolved address; IP-literal entries are direct rules of the bridge's ACL"},
    ProviderEntry{"lima", "Lima virtual machines on macOS, confined by sandbox-exec and an egress proxy",
                  &provider::lima::capabilities, &provider::lima::create,
                  "agentctl's egress proxy, deciding each connection by name and resolved address; sandbox-exec "
                  "keeps the VM from going around it"},
    ProviderEntry{"hyperv", "Hyper-V on Windows (not implemented yet: every feature is gated)",
                  &provider::hyperv::capabilities, &provider::hyperv::create,
                  "nothing yet: the Hyper-V provider cannot enforce a network policy"},
};

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

}  // namespace agentctl
