// compute_sandbox_spec(): profiles, the --spec file and the flags, layered in
// that order into the one effective spec a provider receives.
#include "policy/sandbox_spec.hpp"

#include <algorithm>
#include <charconv>
#include <tuple>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "policy/catalog.hpp"
#include "policy/mounts.hpp"
#include "policy/paths.hpp"
#include "policy/secret_store.hpp"

namespace agentctl::policy {
namespace {

// Runs each step, keeping every failure so they are reported together.
class Problems {
public:
    template <typename Step>
    void run(Step&& step) {
        try {
            step();
        } catch (const Error& error) {
            m_messages.emplace_back(error.what());
            if (m_hint.empty()) m_hint = error.hint();
        }
    }
    void add(std::string message) { m_messages.push_back(std::move(message)); }
    void throw_if_any() const {
        if (m_messages.empty()) return;
        if (m_messages.size() == 1) throw Error(m_messages.front(), m_hint);
        std::string text = fmt::format("{} problems with this sandbox's settings:", m_messages.size());
        for (const auto& message : m_messages) text += "\n  " + message;
        throw Error(text, "fix every problem above; nothing was created");
    }

private:
    std::vector<std::string> m_messages;
    std::string m_hint;
};

struct Layered {
    ProfileSpec spec;
    std::vector<std::string> profiles;
    std::string image;
};

std::string resolve_user_path(const std::string& path, const Environment& env) {
    return clean_path(expand_tilde(path, env.home).value_or(path), env.cwd);
}

ProfileSpec flags_layer(const SpecInputs& in, Problems& problems) {
    ProfileSpec cli;
    for (const auto& entry : in.allow) problems.run([&] { cli.allow.push_back(parse_allow_entry(entry, "--allow")); });
    for (const auto& file : in.allow_files) {
        problems.run([&] {
            auto path = resolve_user_path(file, in.env);
            auto rules = load_allow_file(path);
            cli.allow.insert(cli.allow.end(), rules.begin(), rules.end());
            cli.allow_files.push_back(path);
        });
    }
    problems.run([&] { cli.allow_presets = preset_names(in.allow_presets); });
    for (const auto& entry : in.budgets) {
        problems.run([&] { tighten_budgets(cli.budgets, {parse_budget_limit(entry)}); });
    }
    for (const auto& text : in.ports) {
        problems.run([&] {
            auto forward = parse_port_flag(text);
            for (const auto& other : cli.ports) {
                if (other.host_port == forward.host_port && other.protocol == forward.protocol) {
                    throw Error(fmt::format("--port {}: host port {}/{} is already forwarded", text, forward.host_port,
                                            forward.protocol));
                }
            }
            cli.ports.push_back(forward);
        });
    }
    if (!in.cpu_cores.empty()) {
        int cores = 0;
        auto [end, ec] = std::from_chars(in.cpu_cores.data(), in.cpu_cores.data() + in.cpu_cores.size(), cores);
        if (ec != std::errc() || end != in.cpu_cores.data() + in.cpu_cores.size() || cores < 1 || cores > 1024) {
            problems.add(fmt::format("invalid --cpu-cores \"{}\": a whole number from 1 to 1024", in.cpu_cores));
        } else {
            cli.resources.cpu_cores = cores;
        }
    }
    for (auto [flag, text, target] : {std::tuple{"--memory", &in.memory, &cli.resources.memory_bytes},
                                      std::tuple{"--disk-size", &in.disk_size, &cli.resources.disk_bytes}}) {
        if (text->empty()) continue;
        if (auto problem = size_problem(*text, target == &cli.resources.memory_bytes); problem.empty()) {
            *target = *parse_size(*text);
        } else {
            problems.add(fmt::format("invalid {} \"{}\": {}", flag, *text, problem));
        }
    }
    if (!in.processes.empty()) {
        int processes = 0;
        auto [end, ec] = std::from_chars(in.processes.data(), in.processes.data() + in.processes.size(), processes);
        if (ec != std::errc() || end != in.processes.data() + in.processes.size() || processes < 1 ||
            processes > k_max_processes) {
            problems.add(
                fmt::format("invalid --processes \"{}\": a whole number from 1 to {}", in.processes, k_max_processes));
        } else {
            cli.resources.processes = processes;
        }
    }
    for (const auto& name : in.packages) {
        problems.run([&] {
            check_package_name(name);
            if (std::find(cli.packages.begin(), cli.packages.end(), name) == cli.packages.end())
                cli.packages.push_back(name);
        });
    }
    if (!in.isolation.empty()) {
        if (in.isolation == "vm" || in.isolation == "container") {
            cli.isolation = in.isolation == "vm" ? Isolation::Vm : Isolation::Container;
            cli.isolation_origin = "--isolation";
        } else {
            problems.add(fmt::format("invalid --isolation \"{}\": vm or container", in.isolation));
        }
    }
    if (in.deny_lan) cli.deny_lan = true;
    for (const auto& flag : in.secrets) problems.run([&] { cli.secrets.push_back(parse_secret_flag(flag)); });
    return cli;
}

Layered layer_everything(const SpecInputs& in, Problems& problems) {
    Layered out;
    out.image = in.image;
    std::optional<SpecDocument> document;
    if (!in.spec_file.empty()) {
        if (!in.image.empty() || !in.profiles.empty()) {
            problems.add("--spec cannot be combined with --image or --profile: the spec file names both");
        }
        problems.run([&] {
            auto path = resolve_user_path(in.spec_file, in.env);
            auto text = core::read_file_if_exists(path);
            if (!text) throw Error(fmt::format("spec file {} does not exist", path));
            LoadContext context;
            context.home = in.env.home;
            document = parse_spec_document(*text, path, context);
        });
    }
    out.profiles = document ? document->profiles : in.profiles;
    if (document && !document->image.empty()) out.image = document->image;
    if (out.profiles.empty() && !document) out.profiles = {in.env.default_profile};
    for (const auto& name : out.profiles) {
        problems.run([&] { out.spec = merge_profile_specs(out.spec, load_profile(name, in.env).spec); });
    }
    if (document) problems.run([&] { out.spec = merge_profile_specs(out.spec, document->overrides); });
    auto cli = flags_layer(in, problems);
    if (cli.isolation == Isolation::Container && out.spec.isolation == Isolation::Vm) {
        problems.add(
            fmt::format("--isolation container conflicts with isolation: vm set by {}", out.spec.isolation_origin));
    }
    problems.run([&] { out.spec = merge_profile_specs(out.spec, cli); });
    if (in.allow_lan && in.deny_lan) problems.add("--allow-lan and --deny-lan contradict each other; give one");
    return out;
}

NetworkPolicy network_of(const SpecInputs& in, const ProfileSpec& spec, Problems& problems) {
    NetworkPolicy policy;
    policy.enabled = !in.no_network_policy;
    policy.allow_lan = in.allow_lan;
    policy.deny_lan = in.allow_lan ? false : spec.deny_lan.value_or(true);
    auto add = [&](const AllowRule& rule) {
        if (std::find(policy.allow.begin(), policy.allow.end(), rule) == policy.allow.end())
            policy.allow.push_back(rule);
    };
    for (const auto& rule : spec.allow) add(rule);
    for (const auto& name : spec.allow_presets) {
        problems.run([&] {
            for (const auto& rule : expand_preset(name)) add(rule);
        });
    }
    if (!in.agent.empty()) {
        problems.run([&] {
            for (const auto& rule : agent_rules(find_agent(in.agent))) add(rule);
        });
    }
    policy.dns.servers = spec.dns.servers.value_or(std::vector<std::string>{});
    policy.dns.disabled = spec.dns.disabled.value_or(false);
    policy.budgets = spec.budgets;
    policy.default_budget = spec.default_budget.value_or(0);
    return policy;
}

std::vector<MountRequest> requests_from(const std::vector<ProfileMount>& mounts) {
    std::vector<MountRequest> out;
    for (const auto& mount : mounts) out.push_back({mount.host_path, mount.guest_path, mount.writable, mount.origin});
    return out;
}

std::vector<MountRequest> with_flags(std::vector<MountRequest> base, const MountFlags& flags, const std::string& name,
                                     Problems& problems, std::vector<std::string>* notices) {
    if (flags.none) return {};
    if (flags.only) base.clear();
    std::vector<MountRequest> added;
    for (const auto& text : flags.mounts) problems.run([&] { added.push_back(parse_mount_flag(text)); });
    auto layered = layer_mount_flags(std::move(base), added, name);
    if (notices) notices->insert(notices->end(), layered.notices.begin(), layered.notices.end());
    if (flags.writable) {
        for (auto& request : layered.requests) request.writable = true;
    }
    return std::move(layered.requests);
}

MountContext mount_context(const std::string& name, const Environment& env, const MountPolicy& policy) {
    return MountContext{name, env.home, env.cwd, env.config_dir, policy, true, {env.state_dir, env.runtime_dir}};
}

}  // namespace

NetworkPolicy compute_network_policy(const SpecInputs& inputs) {
    Problems problems;
    auto layered = layer_everything(inputs, problems);
    auto policy = network_of(inputs, layered.spec, problems);
    problems.throw_if_any();
    return policy;
}

SandboxSpec compute_sandbox_spec(const SpecInputs& inputs, std::vector<std::string>* notices) {
    Problems problems;
    auto layered = layer_everything(inputs, problems);
    SandboxSpec spec;
    spec.name = inputs.name;
    spec.image = layered.image;
    spec.profiles = layered.profiles;
    spec.network = network_of(inputs, layered.spec, problems);
    spec.ports = layered.spec.ports;
    spec.resources = layered.spec.resources;
    if (spec.resources.processes == 0) spec.resources.processes = k_default_processes;
    spec.packages = layered.spec.packages;
    spec.agent = inputs.agent;
    // The sandbox user is `agent`, or the agent's own name with --agent (the
    // reference's `.user.name`); nothing else overrides it today.
    spec.user = inputs.agent.empty() ? std::string(k_default_user) : inputs.agent;
    spec.isolation = layered.spec.isolation.value_or(Isolation::Vm);
    spec.viewer = layered.spec.viewer;
    spec.target = inputs.target;
    problems.run([&] {
        spec.secrets = secret_uses(inputs.env.state_dir, layered.spec.secrets, layered.spec.secret_forbids,
                                   inputs.agent, spec.network.enabled, notices);
    });
    auto requests = with_flags(requests_from(layered.spec.mounts), inputs.mount_flags, inputs.name, problems, notices);
    // Mounts are resolved last and only when everything else is valid, because
    // resolving may create directories.
    problems.throw_if_any();
    auto context = mount_context(inputs.name, inputs.env, layered.spec.mount_policy);
    context.create_directories = inputs.create_directories;
    spec.mounts = resolve_mounts(requests, context);
    return spec;
}

namespace {

// The mountPolicy of `profiles` merged (empty: env.default_profile).
MountPolicy merged_mount_policy(const std::vector<std::string>& profiles, const Environment& env) {
    Problems problems;
    ProfileSpec merged;
    auto names = profiles.empty() ? std::vector<std::string>{env.default_profile} : profiles;
    for (const auto& profile : names) {
        problems.run([&] { merged = merge_profile_specs(merged, load_profile(profile, env).spec); });
    }
    problems.throw_if_any();
    return merged.mount_policy;
}

}  // namespace

std::string check_copy_host_path(const std::string& name, const std::vector<std::string>& profiles,
                                 const std::string& path, const Environment& env) {
    return check_copy_path(path, mount_context(name, env, merged_mount_policy(profiles, env)));
}

void recheck_start_mounts(const std::string& name, const std::vector<std::string>& profiles,
                          const std::vector<Mount>& recorded, const Environment& env) {
    if (recorded.empty()) return;
    recheck_mounts(recorded, mount_context(name, env, merged_mount_policy(profiles, env)));
}

std::optional<std::vector<Mount>> resolve_start_mounts(const std::string& name,
                                                       const std::vector<std::string>& profiles,
                                                       const MountFlags& flags, const std::vector<Mount>& previous,
                                                       const Environment& env, std::vector<std::string>* notices,
                                                       bool create_directories) {
    if (flags.mounts.empty() && !flags.only && !flags.none && !flags.writable) return std::nullopt;
    Problems problems;
    ProfileSpec merged;
    auto names = profiles.empty() ? std::vector<std::string>{env.default_profile} : profiles;
    for (const auto& profile : names) {
        problems.run([&] { merged = merge_profile_specs(merged, load_profile(profile, env).spec); });
    }
    std::vector<MountRequest> base;
    for (const auto& mount : previous)
        base.push_back({mount.host_path, mount.guest_path, mount.writable, mount.origin});
    auto requests = with_flags(std::move(base), flags, name, problems, notices);
    problems.throw_if_any();
    auto context = mount_context(name, env, merged.mount_policy);
    context.create_directories = create_directories;
    return resolve_mounts(requests, context);
}

}  // namespace agentctl::policy
