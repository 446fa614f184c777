// logs NAME [--network | --exec] [--follow] [--since WHEN] [--tail N] [--summary]
#include <chrono>

#include "cli/commands_list.hpp"
#include "egress_proxy/log_query.hpp"

namespace agentctl::cli {

void add_logs(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("logs", "Show a sandbox's network decisions (or exec history)");
    auto name = std::make_shared<std::string>();
    auto network = std::make_shared<bool>(false);
    auto exec = std::make_shared<bool>(false);
    auto since = std::make_shared<std::string>();
    auto tail = std::make_shared<std::optional<std::size_t>>();
    auto request = std::make_shared<LogRequest>();
    cmd->add_option("NAME", *name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    auto* network_flag = cmd->add_flag("--network", *network, "Egress decisions: allowed and refused (default)");
    cmd->add_flag("--exec", *exec, "Commands run with exec/shell")->excludes(network_flag);
    auto* follow = cmd->add_flag("-f,--follow", request->follow, "Keep printing new lines until interrupted");
    cmd->add_option("--since", *since, "Only what was logged since a duration ago (30s, 15m, 2h, 7d) or a time")
        ->type_name("DURATION|TIME");
    cmd->add_option("--tail", *tail, "Only the last N lines (then follow on with --follow)")
        ->type_name("N")
        ->check(CLI::NonNegativeNumber);
    cmd->add_flag("--summary", request->summary,
                  "One row per destination: connections, bytes up and down, first and last seen, refusals")
        ->excludes(follow);
    set_examples(*cmd, {"agentctl logs demo", "agentctl logs demo --network --follow",
                        "agentctl logs demo --network --since 1h --summary", "agentctl logs demo --tail 20",
                        "agentctl logs demo --output json"});
    // `network` is captured only to keep it alive: CLI11 writes to it while parsing.
    cmd->callback([&env, name, network, exec, since, tail, request] {
        env.action = [&env, name, network, exec, since, tail, request] {
            validate_instance_name(*name);
            if (!since->empty()) request->since = egress_proxy::parse_since(*since, std::chrono::system_clock::now());
            request->tail = *tail;
            request->json = env.session.json();
            // logs.exec belongs to no provider part yet, so the gate refuses it everywhere.
            env.session.gate(*exec ? Feature("logs.exec") : Feature("logs.network"));
            return env.session.egress_log().logs(*name, *request);
        };
    });
}

}  // namespace agentctl::cli
