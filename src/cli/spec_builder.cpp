// Temporary until the policy layer's spec computation is wired in.
#include "agentctl/error.hpp"
#include "cli/sandbox_options.hpp"

namespace agentctl::cli {

SandboxSpec build_sandbox_spec(Session&, const CreateOptions&) { throw Error("policy layer not wired yet"); }

std::optional<std::vector<Mount>> build_start_mounts(Session&, const std::string&, const std::vector<std::string>&,
                                                     const MountOptions& options) {
    if (options.mounts.empty() && !options.only && !options.none && !options.writable) return std::nullopt;
    throw Error("policy layer not wired yet");
}

}  // namespace agentctl::cli
