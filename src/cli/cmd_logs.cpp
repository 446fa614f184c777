// logs NAME [--network | --exec] [--follow]
#include "cli/commands_list.hpp"

namespace agentctl::cli {

void add_logs(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("logs", "Show a sandbox's network decisions (or exec history)");
    auto name = std::make_shared<std::string>();
    auto network = std::make_shared<bool>(false);
    auto exec = std::make_shared<bool>(false);
    auto follow = std::make_shared<bool>(false);
    cmd->add_option("NAME", *name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    auto* network_flag = cmd->add_flag("--network", *network, "Egress decisions: allowed and refused (default)");
    cmd->add_flag("--exec", *exec, "Commands run with exec/shell")->excludes(network_flag);
    cmd->add_flag("-f,--follow", *follow, "Keep printing new lines until interrupted");
    set_examples(*cmd,
                 {"agentctl logs demo", "agentctl logs demo --network --follow", "agentctl logs demo --output json"});
    // `network` is captured only to keep it alive: CLI11 writes to it while parsing.
    cmd->callback([&env, name, network, exec, follow] {
        env.action = [&env, name, network, exec, follow] {
            validate_instance_name(*name);
            LogRequest request;
            request.follow = *follow;
            request.json = env.session.json();
            // logs.exec belongs to no provider part yet, so the gate refuses it everywhere.
            env.session.gate(*exec ? Feature("logs.exec") : Feature("logs.network"));
            return env.session.egress_log().logs(*name, request);
        };
    });
}

}  // namespace agentctl::cli
