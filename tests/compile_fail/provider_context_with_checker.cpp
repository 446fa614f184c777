// The control for provider_context_without_checker.cpp: the same context with
// a mount checker compiles, so the other file fails for the missing checker
// and nothing else.
#include "agentctl/provider.hpp"

agentctl::ProviderContext make(agentctl::ProcessRunner& runner, const agentctl::HostPlatform& platform,
                               agentctl::Reporter& reporter, std::ostream& out, const agentctl::MountChecker& mounts) {
    return agentctl::ProviderContext{
        .runner = runner, .platform = platform, .reporter = reporter, .out = out, .mount_checker = mounts};
}
