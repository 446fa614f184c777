// Register functions of every verb; each is defined in its own cmd_<verb>.cpp.
#pragma once

#include "cli/command.hpp"

namespace agentctl::egress_proxy {
struct ProxyOptions;
}  // namespace agentctl::egress_proxy

namespace agentctl::cli {

// `config set` and `profile set`: writes KEY=VALUE to the user's file, or with
// --preview prints what the file would become and writes nothing.
void set_config_key(Session& session, const std::string& key, const std::string& value);

void add_create(CLI::App& app, CommandEnv& env);
void add_start(CLI::App& app, CommandEnv& env);
void add_stop(CLI::App& app, CommandEnv& env);
void add_delete(CLI::App& app, CommandEnv& env);
void add_list(CLI::App& app, CommandEnv& env);
void add_status(CLI::App& app, CommandEnv& env);
void add_gc(CLI::App& app, CommandEnv& env);
void add_pool(CLI::App& app, CommandEnv& env);
void add_shell(CLI::App& app, CommandEnv& env);
void add_exec(CLI::App& app, CommandEnv& env);
void add_cp(CLI::App& app, CommandEnv& env);
void add_view(CLI::App& app, CommandEnv& env);
void add_logs(CLI::App& app, CommandEnv& env);
void add_snapshot(CLI::App& app, CommandEnv& env);
void add_image(CLI::App& app, CommandEnv& env);
void add_policy(CLI::App& app, CommandEnv& env);
void add_profile(CLI::App& app, CommandEnv& env);
void add_secret(CLI::App& app, CommandEnv& env);
void add_config(CLI::App& app, CommandEnv& env);
void add_capabilities(CLI::App& app, CommandEnv& env);
void add_completion(CLI::App& app, CommandEnv& env);
void add_egress_proxy(CLI::App& app, CommandEnv& env);
// The flags of `egress-proxy` (egress_proxy/proxy_arguments.hpp), read into `options`.
void add_egress_proxy_options(CLI::App& command, egress_proxy::ProxyOptions& options);
void add_help(CLI::App& app, CommandEnv& env);
void add_version(CLI::App& app, CommandEnv& env);
void add_man(CLI::App& app, CommandEnv& env);

}  // namespace agentctl::cli
