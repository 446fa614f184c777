// Placeholder until the incus provider lands: every feature is UnderDevelopment.
#include "provider/incus/incus_provider.hpp"

#include "agentctl/error.hpp"

namespace agentctl::provider::incus {

CapabilityMatrix capabilities(const HostPlatform&) {
    CapabilityMatrix matrix;
    for (auto feature : k_features) {
        matrix.set(feature, CapabilityStatus::UnderDevelopment, "the incus provider is not built yet");
    }
    return matrix;
}

std::unique_ptr<Provider> create(ProviderContext&) {
    throw Error("the incus provider is not built yet");
}

}  // namespace agentctl::provider::incus
