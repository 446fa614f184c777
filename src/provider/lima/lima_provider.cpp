// Placeholder until the lima provider lands: every feature is UnderDevelopment.
#include "provider/lima/lima_provider.hpp"

#include "agentctl/error.hpp"

namespace agentctl::provider::lima {

CapabilityMatrix capabilities(const HostPlatform&) {
    CapabilityMatrix matrix;
    for (auto feature : k_features) {
        matrix.set(feature, CapabilityStatus::UnderDevelopment, "the lima provider is not built yet");
    }
    return matrix;
}

std::unique_ptr<Provider> create(ProviderContext&) {
    throw Error("the lima provider is not built yet");
}

}  // namespace agentctl::provider::lima
