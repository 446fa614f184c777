// The lima provider's factory; the provider class itself stays in the .cpp.
#pragma once

#include <memory>

#include "agentctl/provider.hpp"

namespace agentctl::provider::lima {

[[nodiscard]] CapabilityMatrix capabilities(const HostPlatform& platform);
[[nodiscard]] std::unique_ptr<Provider> create(ProviderContext& context);

}  // namespace agentctl::provider::lima
