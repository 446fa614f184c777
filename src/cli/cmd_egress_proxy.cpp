// The hidden `egress-proxy` verb: agentctl re-run as a sandbox's egress proxy.
// Its command line is written by egress_proxy::proxy_command, with the same flag names.
#include "cli/commands_list.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "egress_proxy/proxy_arguments.hpp"

namespace agentctl::cli {

void add_egress_proxy_options(CLI::App& cmd, egress_proxy::ProxyOptions& options) {
    namespace flag = egress_proxy::flag;
    const auto name = [](std::string_view f) { return std::string(f); };
    cmd.add_option(name(flag::k_listen), options.listen, "ADDRESS:PORT to listen on")->required();
    cmd.add_option(name(flag::k_policy), options.policy_file, "The policy file to enforce")->required();
    cmd.add_option(name(flag::k_pid_file), options.pid_file, "Write the process id here once listening");
    cmd.add_option(name(flag::k_log), options.log_file, "Decision log (JSON Lines)");
    cmd.add_option(name(flag::k_resolve_file), options.resolve_file, "Static name-to-address map, /etc/hosts format");
    cmd.add_option(name(flag::k_sandbox), options.sandbox_name, "Sandbox name for refusal hints");
    cmd.add_option(name(flag::k_event_loops), options.limits.event_loops,
                   "Event loops (threads); 0: one per CPU it may run on, at most " +
                       std::to_string(egress_proxy::k_max_event_loops))
        ->check(CLI::Range(std::size_t{0}, egress_proxy::k_max_event_loops));
    cmd.add_option(name(flag::k_max_tunnels), options.limits.max_tunnels,
                   "Connections open to destinations at once; more are answered 503 tunnel-limit")
        ->check(CLI::PositiveNumber);
    cmd.add_option(name(flag::k_secrets_fd), options.secrets_fd,
                   "Read the secrets and the sandbox CA from this descriptor at start (agentctl passes a pipe)");
    cmd.add_option(name(flag::k_secrets_socket), options.secrets_socket,
                   "Take new secret values on this Unix socket while running (from root only)");
    cmd.add_option(name(flag::k_secrets_peer_uid), options.secrets_peer_uid,
                   "Also take new secret values from this user on the socket (the user that runs agentctl)")
        ->check(CLI::Range(0L, 4294967295L));
    cmd.add_option(name(flag::k_upstream_ca), options.upstream_ca_file,
                   "Also trust this CA for the hosts whose TLS is terminated (test origins only)");
    cmd.add_flag(name(flag::k_companion), options.companion,
                 "Run alone in a companion instance on the sandbox's bridge (listen on its own address)");
    cmd.add_option(name(flag::k_server_routes), options.server_routes,
                   "The Incus server's /proc/net/fib_trie (a companion instance): its addresses are refused at "
                   "each connection");
}

void add_egress_proxy(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand(std::string(egress_proxy::k_verb),
                                   "Run a sandbox's egress proxy in the foreground (internal)");
    cmd->group("");  // hidden from help and completion
    auto options = std::make_shared<egress_proxy::ProxyOptions>();
    add_egress_proxy_options(*cmd, *options);
    cmd->callback([&env, options] { env.action = [options] { return egress_proxy::run_egress_proxy(*options); }; });
}

}  // namespace agentctl::cli
