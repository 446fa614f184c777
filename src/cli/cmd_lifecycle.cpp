// stop, delete (alias rm): the lifecycle verbs that take one or more names.
#include <iostream>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"

namespace agentctl::cli {
namespace {

// Runs `act` for each name in turn, as `docker rm a b` does: a failure is
// reported and the next name is still tried; the exit status is the first
// failure's. A single name behaves exactly like before (its error propagates).
int for_each_name(Session& session, const std::vector<std::string>& names,
                  const std::function<void(const std::string&)>& act) {
    for (const auto& name : names) validate_instance_name(name);
    if (names.size() == 1) {
        act(names.front());
        return 0;
    }
    int status = 0;
    for (const auto& name : names) {
        try {
            act(name);
        } catch (const Error& e) {
            session.fail_step();
            std::cerr << fmt::format("agentctl: {}: {}\n", name, e.what());
            if (!e.hint().empty()) std::cerr << "hint: " << e.hint() << "\n";
            if (status == 0) status = e.code();
        }
    }
    return status;
}

}  // namespace

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
            return for_each_name(env.session, *names, [&](const std::string& name) {
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
            return for_each_name(env.session, *names, [&](const std::string& name) {
                env.session.lock_instance(name);
                env.session.lifecycle().remove(name, *force);
            });
        };
    });
}

}  // namespace agentctl::cli
