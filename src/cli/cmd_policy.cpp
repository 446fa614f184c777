// policy check|add|remove
#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"

namespace agentctl::cli {

void add_policy(CLI::App& app, CommandEnv& env) {
    auto* group = app.add_subcommand("policy", "Check and change what a sandbox may reach");
    group->require_subcommand(1);
    auto* check = group->add_subcommand("check", "Would the egress policy allow HOST[:PORT], and why");
    auto* add = group->add_subcommand("add", "Allow more destinations in a running sandbox (no restart)");
    auto* remove = group->add_subcommand("remove", "Remove allow entries from a running sandbox (no restart)");
    (void)env;
    (void)check;
    (void)add;
    (void)remove;
}

}  // namespace agentctl::cli
