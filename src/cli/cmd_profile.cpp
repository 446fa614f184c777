// profile list|show|set|presets|packages
#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"

namespace agentctl::cli {

void add_profile(CLI::App& app, CommandEnv& env) {
    auto* group = app.add_subcommand("profile", "Inspect profiles, presets and the package catalog");
    group->require_subcommand(1);
    (void)env;
}

}  // namespace agentctl::cli
