// Placeholder until the hyperv provider lands: every feature is UnderDevelopment.
#include "provider/hyperv/hyperv_provider.hpp"

#include "agentctl/error.hpp"

namespace agentctl::provider::hyperv {

CapabilityMatrix capabilities(const HostPlatform&) {
    CapabilityMatrix matrix;
    for (auto feature : k_features) {
        matrix.set(feature, CapabilityStatus::UnderDevelopment, "the hyperv provider is not built yet");
    }
    return matrix;
}

std::unique_ptr<Provider> create(ProviderContext&) {
    throw Error("the hyperv provider is not built yet");
}

}  // namespace agentctl::provider::hyperv
