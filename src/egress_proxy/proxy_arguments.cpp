#include "egress_proxy/proxy_arguments.hpp"

namespace agentctl::egress_proxy {

std::vector<std::string> proxy_command(const std::string& program, const ProxyOptions& options) {
    const ProxyOptions defaults;
    std::vector<std::string> argv{program, std::string(k_verb)};
    const auto text = [&argv](std::string_view name, const std::string& value) {
        if (!value.empty()) argv.insert(argv.end(), {std::string(name), value});
    };
    const auto number = [&argv](std::string_view name, auto value, auto unset) {
        if (value != unset) argv.insert(argv.end(), {std::string(name), std::to_string(value)});
    };
    text(flag::k_listen, options.listen);
    text(flag::k_policy, options.policy_file);
    text(flag::k_pid_file, options.pid_file);
    text(flag::k_log, options.log_file);
    text(flag::k_resolve_file, options.resolve_file);
    text(flag::k_sandbox, options.sandbox_name);
    number(flag::k_event_loops, options.limits.event_loops, defaults.limits.event_loops);
    number(flag::k_max_tunnels, options.limits.max_tunnels, defaults.limits.max_tunnels);
    number(flag::k_secrets_fd, options.secrets_fd, defaults.secrets_fd);
    text(flag::k_secrets_socket, options.secrets_socket);
    number(flag::k_secrets_peer_uid, options.secrets_peer_uid, defaults.secrets_peer_uid);
    text(flag::k_upstream_ca, options.upstream_ca_file);
    if (options.companion) argv.emplace_back(flag::k_companion);
    text(flag::k_server_routes, options.server_routes);
    return argv;
}

}  // namespace agentctl::egress_proxy
