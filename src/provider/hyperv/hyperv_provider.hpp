// The hyperv provider's factory; the provider class itself stays in the .cpp.
//
// Hyper-V support is a stub: every feature is UnderDevelopment except
// network.port-publish, fs.mount and fs.mount.readonly, which are
// ManualWorkaround with the steps written out. The plans (the PowerShell a
// real run would execute) live in plan.hpp.
#pragma once

#include <memory>

#include "agentctl/provider.hpp"

namespace agentctl::provider::hyperv {

// The capability matrix: every feature of k_features has a status and a
// message naming what is missing and what to do instead. Independent of the
// host platform.
[[nodiscard]] CapabilityMatrix capabilities(const HostPlatform& platform);

// The matrix capabilities() starts from: the provider's parts, Lifecycle and
// EgressPolicy (the ones with a --preview plan).
[[nodiscard]] CapabilityMatrix base_capabilities();

// The provider: the Lifecycle and EgressPolicy parts only. With
// context.preview, create/start/stop/remove and apply_network_policy write one
// shell-quoted `powershell.exe ... -Command` line per step to context.out
// (notes and a stub warning go to the reporter) and run nothing; list and
// status, and every call without preview, throw agentctl::Error with exit code
// 2 and the feature's capability message. Never throws itself.
[[nodiscard]] std::unique_ptr<Provider> create(ProviderContext& context);

}  // namespace agentctl::provider::hyperv
