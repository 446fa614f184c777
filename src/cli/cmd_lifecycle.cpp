// start, stop, delete (alias rm): the lifecycle verbs that take one or more names.
#include <fmt/format.h>

#include "cli/commands_list.hpp"
#include "cli/for_each_name.hpp"
#include "cli/sandbox_options.hpp"

namespace agentctl::cli {

void add_start(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("start", "Start one or more sandboxes with their network policy in force");
    auto names = std::make_shared<std::vector<std::string>>();
    auto profiles = std::make_shared<std::vector<std::string>>();
    auto mounts = std::make_shared<MountOptions>();
    cmd->add_option("NAME", *names, "Sandbox name (several may be given)")
        ->required()
        ->type_name(value_type::k_sandbox);
    cmd->add_option("--profile", *profiles, "Profile whose mountPolicy constrains the mount flags (repeatable)")
        ->type_name(value_type::k_profile);
    add_mount_flags(*cmd, *mounts);
    set_examples(*cmd,
                 {"agentctl start demo", "agentctl start demo --mount ~/src/app:/workspace:w",
                  "agentctl start demo --mount-none", "agentctl --preview start demo", "agentctl start demo work"});
    cmd->callback([&env, names, profiles, mounts] {
        env.action = [&env, names, profiles, mounts] {
            auto& session = env.session;
            session.gate("start");
            return for_each_name(session, *names, "started", [&](const std::string& name) {
                StartRequest request;
                std::vector<std::string> notices;
                request.mounts = build_start_mounts(session, name, *profiles, *mounts, &notices);
                for (const auto& notice : notices) session.reporter().notice(notice);
                if (request.mounts && !request.mounts->empty()) session.gate("fs.mount");
                if (request.mounts) {
                    for (const auto& m : *request.mounts) {
                        if (m.writable) {
                            session.reporter().warning(
                                fmt::format("writable mount: {} -> {} (the sandbox can change these host files)",
                                            m.host_path, m.guest_path));
                        }
                    }
                }
                session.lock_instance(name);
                session.lifecycle().start(name, request);
            });
        };
    });
}

void add_stop(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("stop", "Stop one or more running sandboxes");
    auto names = std::make_shared<std::vector<std::string>>();
    auto request = std::make_shared<StopRequest>();
    auto timeout = std::make_shared<int>(-1);
    cmd->add_option("NAME", *names, "Sandbox name (several may be given)")
        ->required()
        ->type_name(value_type::k_sandbox);
    cmd->add_flag("-f,--force", request->force, "Stop immediately, without a clean shutdown");
    cmd->add_option("--timeout", *timeout, "Seconds to wait for a clean shutdown")->check(CLI::Range(0, 86400));
    set_examples(*cmd, {"agentctl stop demo", "agentctl stop demo --timeout 30", "agentctl stop -f demo",
                        "agentctl stop demo work"});
    cmd->callback([&env, names, request, timeout] {
        env.action = [&env, names, request, timeout] {
            if (*timeout >= 0) request->timeout_seconds = *timeout;
            env.session.gate("stop");
            return for_each_name(env.session, *names, "stopped", [&](const std::string& name) {
                env.session.lock_instance(name);
                env.session.lifecycle().stop(name, *request);
            });
        };
    });
}

void add_delete(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("delete", "Delete sandboxes and everything agentctl made for them");
    cmd->alias("rm");
    auto names = std::make_shared<std::vector<std::string>>();
    auto force = std::make_shared<bool>(false);
    cmd->add_option("NAME", *names, "Sandbox name (several may be given)")
        ->required()
        ->type_name(value_type::k_sandbox);
    cmd->add_flag("-f,--force", *force, "Stop the sandbox first if it is running");
    set_examples(*cmd, {"agentctl delete demo", "agentctl delete -f demo", "agentctl rm -f demo work"});
    cmd->callback([&env, names, force] {
        env.action = [&env, names, force] {
            env.session.gate("delete");
            return for_each_name(env.session, *names, "deleted", [&](const std::string& name) {
                env.session.lock_instance(name);
                env.session.lifecycle().remove(name, *force);
            });
        };
    });
}

}  // namespace agentctl::cli
