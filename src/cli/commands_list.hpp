// Register functions of every verb; each is defined in its own cmd_<verb>.cpp.
#pragma once

#include "cli/command.hpp"

namespace agentctl::cli {

void add_create(CLI::App& app, CommandEnv& env);
void add_start(CLI::App& app, CommandEnv& env);
void add_stop(CLI::App& app, CommandEnv& env);
void add_delete(CLI::App& app, CommandEnv& env);
void add_list(CLI::App& app, CommandEnv& env);
void add_status(CLI::App& app, CommandEnv& env);
void add_shell(CLI::App& app, CommandEnv& env);
void add_exec(CLI::App& app, CommandEnv& env);
void add_view(CLI::App& app, CommandEnv& env);
void add_logs(CLI::App& app, CommandEnv& env);
void add_snapshot(CLI::App& app, CommandEnv& env);
void add_image(CLI::App& app, CommandEnv& env);
void add_policy(CLI::App& app, CommandEnv& env);
void add_profile(CLI::App& app, CommandEnv& env);
void add_config(CLI::App& app, CommandEnv& env);
void add_capabilities(CLI::App& app, CommandEnv& env);
void add_completion(CLI::App& app, CommandEnv& env);
void add_egress_proxy(CLI::App& app, CommandEnv& env);

}  // namespace agentctl::cli
