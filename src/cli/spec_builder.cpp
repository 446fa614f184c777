// From create/start flags to the policy layer's inputs, and back to a spec.
#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "cli/sandbox_options.hpp"
#include "policy/sandbox_spec.hpp"

namespace agentctl::cli {
namespace {

// The organisation's baseProfile, when set, is applied first to every sandbox.
std::vector<std::string> with_base_profile(Session& session, std::vector<std::string> profiles,
                                           const policy::Environment& env) {
    auto base = session.config().get("baseProfile");
    if (!base) return profiles;
    if (profiles.empty()) profiles.push_back(env.default_profile);
    if (profiles.front() != base->value) profiles.insert(profiles.begin(), base->value);
    return profiles;
}

policy::MountFlags mount_flags(const MountOptions& options) {
    return policy::MountFlags{options.mounts, options.only, options.none, options.writable};
}

}  // namespace

policy::Environment policy_environment(Session& session) {
    auto& config = session.config();
    std::string profile_dir = session.globals().profile_dir;
    if (profile_dir.empty()) {
        if (auto value = config.get("profileDir"); value && value->source != "default") profile_dir = value->value;
    }
    return policy::environment_from_process(profile_dir, config.value_or("defaultProfile", "default"));
}

namespace {

// create's flags as the policy layer's inputs: one mapping for create and policy check.
policy::SpecInputs spec_inputs(Session& session, const CreateOptions& options) {
    policy::SpecInputs inputs;
    inputs.env = policy_environment(session);
    inputs.name = options.name;
    inputs.image = options.image;
    inputs.spec_file = options.spec_file;
    inputs.profiles =
        options.spec_file.empty() ? with_base_profile(session, options.profiles, inputs.env) : options.profiles;
    inputs.allow = options.allow;
    inputs.allow_files = options.allow_files;
    inputs.allow_presets = options.allow_presets;
    inputs.allow_lan = options.allow_lan;
    inputs.deny_lan = options.deny_lan;
    inputs.no_network_policy = options.no_network_policy;
    inputs.budgets = options.budgets;
    inputs.ports = options.ports;
    if (options.cpu_cores) inputs.cpu_cores = std::to_string(*options.cpu_cores);
    inputs.memory = options.memory;
    inputs.processes = options.processes;
    inputs.disk_size = options.disk_size;
    inputs.agent = options.agent;
    inputs.packages = options.packages;
    inputs.mount_flags = mount_flags(options.mount);
    inputs.isolation = options.isolation;
    inputs.target = options.target;
    inputs.secrets = options.secrets;
    return inputs;
}

}  // namespace

SandboxSpec build_sandbox_spec(Session& session, const CreateOptions& options, bool create_directories,
                               std::vector<std::string>* notices) {
    auto inputs = spec_inputs(session, options);
    inputs.create_directories = create_directories;
    return policy::compute_sandbox_spec(inputs, notices);
}

policy::NetworkPolicy build_network_policy(Session& session, const CreateOptions& options) {
    auto inputs = spec_inputs(session, options);
    if (inputs.name.empty()) inputs.name = "policy-check";
    return policy::compute_network_policy(inputs);
}

void recheck_recorded_mounts(Session& session, const std::string& name, const std::vector<std::string>& profiles,
                             const std::vector<Mount>& recorded) {
    const auto env = policy_environment(session);
    policy::recheck_start_mounts(name, with_base_profile(session, profiles, env), recorded, env);
}

std::optional<std::vector<Mount>> build_start_mounts(Session& session, const std::string& name,
                                                     const std::vector<std::string>& profiles,
                                                     const MountOptions& options, std::vector<std::string>* notices) {
    const bool any = !options.mounts.empty() || options.only || options.none || options.writable;
    if (!any) return std::nullopt;
    const auto env = policy_environment(session);
    std::vector<Mount> previous;
    // Read in a preview too: reading changes nothing, and the preview must resolve what the real run would.
    if (!options.only && !options.none) previous = session.lifecycle().status(name).mounts;
    return policy::resolve_start_mounts(name, with_base_profile(session, profiles, env), mount_flags(options), previous,
                                        env, notices, !session.globals().preview);
}

}  // namespace agentctl::cli
