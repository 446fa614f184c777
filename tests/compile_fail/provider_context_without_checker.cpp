// Must NOT compile: a ProviderContext without the start-time mount check. The
// test "core: compile provider_context_without_checker" compiles this file and
// expects the compiler to reject the missing reference member, so no
// provider can start a sandbox whose recorded mounts nothing checks.
#include "agentctl/provider.hpp"

agentctl::ProviderContext make(agentctl::ProcessRunner& runner, const agentctl::HostPlatform& platform,
                               agentctl::Reporter& reporter, std::ostream& out,
                               const agentctl::MountChecker& /*mounts*/) {
    return agentctl::ProviderContext{.runner = runner, .platform = platform, .reporter = reporter, .out = out};
}
