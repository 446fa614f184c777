// The lima provider's factory; the provider class itself stays in the .cpp.
//
// Lima instances are confined on macOS by running `limactl start` under a
// generated sandbox-exec profile (src/sandbox_profile) that only lets the
// hostagent reach the instance's SSH forward and its egress proxy on loopback;
// the proxy (`agentctl egress-proxy`, re-run from ProviderContext::self_exe)
// applies the allowlist. Per-instance state paths: provider/lima/lima_paths.hpp.
#pragma once

#include <memory>

#include "agentctl/provider.hpp"

namespace agentctl::provider::lima {

// The capability matrix: lifecycle, exec/shell, ports and mounts Supported;
// network.acl / network.deny-lan Supported only when platform.is_macos().
[[nodiscard]] CapabilityMatrix capabilities(const HostPlatform& platform);
// The provider bound to `context` (which must outlive it).
[[nodiscard]] std::unique_ptr<Provider> create(ProviderContext& context);

}  // namespace agentctl::provider::lima
