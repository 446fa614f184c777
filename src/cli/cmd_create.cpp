// create NAME: everything that shapes a sandbox, then the provider builds it.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "policy/secret_store.hpp"
#include "cli/commands_list.hpp"
#include "cli/for_each_name.hpp"
#include "cli/sandbox_options.hpp"

namespace agentctl::cli {

void add_mount_flags(CLI::App& command, MountOptions& options) {
    command
        .add_option("--mount", options.mounts,
                    "Share a host directory: HOST[:GUEST][:w|:ro] (read-only unless :w; repeatable)")
        ->type_name(value_type::k_path);
    auto* only = command.add_flag("--mount-only", options.only, "Use only the --mount directories, not the profile's");
    command.add_flag("--mount-none", options.none, "Share no host directory at all")->excludes(only);
    command.add_flag("--mount-writable", options.writable, "Make every shared directory writable (visible warning)");
}

CLI::Option* add_policy_flags(CLI::App& command, CreateOptions& o) {
    auto* profile = command.add_option("--profile", o.profiles, "Profile to apply (repeatable, applied in order)")
                        ->type_name(value_type::k_profile);
    command.add_option("--allow", o.allow,
                       "Allow a destination: host, host:443, *.domain:80,443, IP, URL (repeatable)");
    command.add_option("--allow-file", o.allow_files, "Read allow entries from a file, one per line (repeatable)")
        ->type_name(value_type::k_file);
    command.add_option("--allow-preset", o.allow_presets, "Allow a named group of hosts: apt, pypi, npm, github, ...")
        ->delimiter(',')
        ->type_name(value_type::k_preset);
    auto* deny_lan = command.add_flag("--deny-lan", o.deny_lan, "Refuse private and link-local ranges (the default)");
    command.add_flag("--allow-lan", o.allow_lan, "Open every LAN address on any port (visible warning)")
        ->excludes(deny_lan);
    command.add_flag("--no-network-policy", o.no_network_policy, "Unrestricted egress (loud warning)");
    command
        .add_option("--agent", o.agent,
                    "Install an agent and allow the hosts it needs: claude, codex, opencode, pi, gemini, cursor "
                    "(create: implies start)")
        ->type_name(value_type::k_agent);
    return profile;
}

namespace {

// The names `create` makes: the names given, or with --count N the one name
// given as a prefix, NAME-1 ... NAME-N. Throws agentctl::Error for a name
// given twice, and for --count with more than one name.
std::vector<std::string> sandbox_names(const std::vector<std::string>& given, int count) {
    if (count > 0) {
        if (given.size() != 1) {
            throw Error(fmt::format("--count takes one name, the prefix of the sandboxes' names, not {}", given.size()),
                        "e.g. agentctl create --count 3 work (makes work-1, work-2, work-3)");
        }
        std::vector<std::string> names;
        for (int i = 1; i <= count; ++i) names.push_back(fmt::format("{}-{}", given.front(), i));
        return names;
    }
    for (auto it = given.begin(); it != given.end(); ++it) {
        if (std::find(it + 1, given.end(), *it) != given.end()) {
            throw Error(fmt::format("the sandbox name {} is given twice", *it), "give each name once");
        }
    }
    return given;
}

// The sandbox's own directories (the last part of the path is its name, as in
// ~/agentctl/workspaces/NAME) that the mounts of `planned` (a dry-run spec)
// will make: a create that fails takes them back, while they are still empty.
// A missing directory that others may share is made and left.
std::vector<std::filesystem::path> own_directories_to_make(const SandboxSpec& planned) {
    std::vector<std::filesystem::path> own;
    for (const auto& mount : planned.mounts) {
        const std::filesystem::path path(mount.host_path);
        std::error_code ec;
        if (path.filename() == planned.name && !std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
            own.push_back(path);
        }
    }
    return own;
}

// One sandbox of `create`: its spec from the options, behind the gates, then the provider builds it.
void create_one(Session& session, CreateOptions& o) {
    // Checked first without touching the disk: the gate decides before anything is made.
    std::vector<std::string> notices;
    auto spec = build_sandbox_spec(session, o, false, &notices);
    for (const auto& notice : notices) session.reporter().notice(notice);
    for (const auto& use : spec.secrets) session.reporter().notice("secret " + policy::describe_secret_use(use));
    if (!spec.secrets.empty()) session.gate("network.credentials");
    if (!spec.target.empty()) session.gate("placement.target");
    if (!spec.mounts.empty()) session.gate("fs.mount");
    if (!spec.ports.empty()) session.gate("network.port-publish");
    if (!spec.packages.empty()) session.gate("provision.packages");
    if (spec.network.enabled) {
        session.gate("network.acl");
        if (spec.network.deny_lan) session.gate("network.deny-lan");
    }
    for (const auto& widening : widenings(spec)) session.reporter().warning(widening);
    for (const auto& budget : spec.network.budgets) {
        session.reporter().notice(fmt::format("upload budget: {} bytes to {}", budget.bytes,
                                              policy::destination_text(budget.host, budget.port)));
    }
    if (spec.network.default_budget != 0) {
        session.reporter().notice(
            fmt::format("upload budget: {} bytes to each other destination", spec.network.default_budget));
    }
    // Under the sandbox's lock before anything is made: a second create of the
    // same name finds the directories there and takes nothing back.
    session.lock_instance(o.name);
    std::vector<std::filesystem::path> made;
    if (!session.globals().preview) {
        made = own_directories_to_make(spec);
        spec = build_sandbox_spec(session, o, true);
    }
    spec.keep_on_failure = o.keep_on_failure;
    try {
        session.lifecycle().create(spec);
    } catch (...) {
        if (!o.keep_on_failure) {
            std::error_code ec;
            for (const auto& directory : made) std::filesystem::remove(directory, ec);  // only while empty
        }
        throw;
    }
}

}  // namespace

void add_create(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("create", "Create a sandbox with a default-deny network policy");
    auto o = std::make_shared<CreateOptions>();
    auto cpu = std::make_shared<int>(0);
    auto names = std::make_shared<std::vector<std::string>>();
    auto count = std::make_shared<int>(0);
    cmd->add_option("NAME", *names, "Name of the new sandbox (several may be given; with --count, the prefix)")
        ->required();
    cmd->add_option("--count", *count, "Create N sandboxes, named NAME-1 ... NAME-N")->check(CLI::Range(1, 1000));
    auto* image = cmd->add_option("--image", o->image, "Image to start from (provider-specific reference)");
    auto* profile = add_policy_flags(*cmd, *o);
    cmd->add_option("--spec", o->spec_file, "A kind: Spec file (image, profiles, overrides)")
        ->type_name(value_type::k_file)
        ->excludes(image)
        ->excludes(profile);
    cmd->add_option("--budget", o->budgets,
                    "Cap what the sandbox may send to a destination: HOST:PORT=SIZE, e.g. api.github.com:443=50MiB "
                    "(repeatable; can only lower a profile's budget)")
        ->type_name("HOST:PORT=SIZE");
    cmd->add_option("--port", o->ports, "Publish a port: [ADDR:]HOST:GUEST[/tcp|udp] (repeatable)");
    cmd->add_option("--cpu-cores", *cpu, "Number of CPU cores")->check(CLI::Range(1, 512));
    cmd->add_option("--memory", o->memory, "Memory size, e.g. 4GiB");
    cmd->add_option("--processes", o->processes,
                    "Most processes and threads at once (can only lower the profiles' limit; default 2048)");
    cmd->add_option("--disk-size", o->disk_size, "Root disk size, e.g. 20GiB");
    cmd->add_option("--package", o->packages, "Install a package in the guest (repeatable)");
    cmd->add_option("--isolation", o->isolation, "vm (default) or container (weaker, visible warning)")
        ->check(CLI::IsMember({"vm", "container"}));
    cmd->add_option("--target", o->target,
                    "Place the sandbox on this member of an Incus cluster (default: Incus chooses)")
        ->type_name("MEMBER");
    cmd->add_flag("--keep-on-failure", o->keep_on_failure,
                  "Keep what a failed create made, to look into (default: remove it all)");
    cmd->add_option("--secret", o->secrets,
                    "Let the sandbox use a secret (agentctl secret set): its variable ENV (default: the catalog's, "
                    "else NAME) holds a placeholder the egress proxy replaces (repeatable)")
        ->type_name("NAME[=ENV]");
    add_mount_flags(*cmd, o->mount);
    set_examples(*cmd, {
                           "agentctl create demo",
                           "agentctl create demo --allow api.github.com:443 --allow-preset apt,pypi",
                           "agentctl create demo --allow api.github.com:443 --budget api.github.com:443=50MiB",
                           "agentctl create work --agent claude --mount ~/src/app:/workspace:w",
                           "agentctl create ci --profile strict --isolation container",
                           "agentctl create build --isolation container --target member2",
                           "agentctl --preview create demo",
                           "agentctl create task-a task-b task-c --agent claude",
                           "agentctl create --count 4 worker --isolation container",
                       });
    cmd->callback([&env, o, cpu, names, count] {
        env.action = [&env, o, cpu, names, count] {
            if (*cpu > 0) o->cpu_cores = *cpu;
            env.session.gate("create");
            const auto all = sandbox_names(*names, *count);
            if (all.size() > 1 && !o->ports.empty()) {
                throw Error(fmt::format("--port publishes a host port, which only one of the {} sandboxes can have",
                                        all.size()),
                            "create the sandbox that publishes the port on its own");
            }
            return for_each_name(env.session, all, "created sandbox", [&](const std::string& name) {
                auto one = *o;
                one.name = name;
                create_one(env.session, one);
            });
        };
    });
}

}  // namespace agentctl::cli
