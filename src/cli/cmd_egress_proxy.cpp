// The hidden `egress-proxy` verb: agentctl re-run as a sandbox's egress proxy.
#include "cli/commands_list.hpp"
#include "egress_proxy/egress_proxy.hpp"

namespace agentctl::cli {

void add_egress_proxy(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("egress-proxy", "Run a sandbox's egress proxy in the foreground (internal)");
    cmd->group("");  // hidden from help and completion
    auto options = std::make_shared<egress_proxy::ProxyOptions>();
    cmd->add_option("--listen", options->listen, "ADDRESS:PORT to listen on")->required();
    cmd->add_option("--policy", options->policy_file, "The policy file to enforce")->required();
    cmd->add_option("--pid-file", options->pid_file, "Write the process id here once listening");
    cmd->add_option("--log", options->log_file, "Decision log (JSON Lines)");
    cmd->add_option("--resolve-file", options->resolve_file, "Static name-to-address map, /etc/hosts format");
    cmd->add_option("--sandbox", options->sandbox_name, "Sandbox name for refusal hints");
    cmd->add_option("--event-loops", options->limits.event_loops,
                    "Event loops (threads); 0: one per CPU it may run on, at most " +
                        std::to_string(egress_proxy::k_max_event_loops))
        ->check(CLI::Range(std::size_t{0}, egress_proxy::k_max_event_loops));
    cmd->add_option("--max-tunnels", options->limits.max_tunnels,
                    "Connections open to destinations at once; more are answered 503 tunnel-limit")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--secrets-fd", options->secrets_fd,
                    "Read the secrets and the sandbox CA from this descriptor at start (agentctl passes a pipe)");
    cmd->add_option("--secrets-socket", options->secrets_socket,
                    "Take new secret values on this Unix socket while running (from root only)");
    cmd->add_option("--secrets-peer-uid", options->secrets_peer_uid,
                    "Also take new secret values from this user on the socket (the user that runs agentctl)")
        ->check(CLI::Range(0L, 4294967295L));
    cmd->add_option("--upstream-ca", options->upstream_ca_file,
                    "Also trust this CA for the hosts whose TLS is terminated (test origins only)");
    cmd->add_flag("--companion", options->companion,
                  "Run alone in a companion instance on the sandbox's bridge (listen on its own address)");
    cmd->add_option("--server-routes", options->server_routes,
                    "The Incus server's /proc/net/fib_trie (a companion instance): its addresses are refused at "
                    "each connection");
    cmd->callback([&env, options] { env.action = [options] { return egress_proxy::run_egress_proxy(*options); }; });
}

}  // namespace agentctl::cli
