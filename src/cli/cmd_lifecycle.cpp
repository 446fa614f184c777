// stop, delete: the lifecycle verbs that take only a name and a few flags.
#include <fmt/format.h>

#include "cli/commands_list.hpp"

namespace agentctl::cli {

void add_stop(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("stop", "Stop a running sandbox");
    auto name = std::make_shared<std::string>();
    auto request = std::make_shared<StopRequest>();
    auto timeout = std::make_shared<int>(-1);
    cmd->add_option("NAME", *name, "Sandbox name")->required();
    cmd->add_flag("--force", request->force, "Stop immediately, without a clean shutdown");
    cmd->add_option("--timeout", *timeout, "Seconds to wait for a clean shutdown")->check(CLI::Range(0, 86400));
    set_examples(*cmd, {"agentctl stop demo", "agentctl stop demo --timeout 30", "agentctl stop demo --force"});
    cmd->callback([&env, name, request, timeout] {
        env.action = [&env, name, request, timeout] {
            validate_instance_name(*name);
            if (*timeout >= 0) request->timeout_seconds = *timeout;
            env.session.gate("stop");
            env.session.lock_instance(*name);
            env.session.provider().stop(*name, *request);
            return 0;
        };
    });
}

void add_delete(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("delete", "Delete a sandbox and everything agentctl made for it");
    auto name = std::make_shared<std::string>();
    auto force = std::make_shared<bool>(false);
    cmd->add_option("NAME", *name, "Sandbox name")->required();
    cmd->add_flag("--force", *force, "Stop the sandbox first if it is running");
    set_examples(*cmd, {"agentctl delete demo", "agentctl delete demo --force"});
    cmd->callback([&env, name, force] {
        env.action = [&env, name, force] {
            validate_instance_name(*name);
            env.session.gate("delete");
            env.session.lock_instance(*name);
            env.session.provider().remove(*name, *force);
            return 0;
        };
    });
}

}  // namespace agentctl::cli
