// Runs run_egress_proxy with the limits exposed as flags, so the suite can use
// short timeouts. Same flags as `agentctl egress-proxy` (proxy_arguments.hpp), plus:
//   --connect-timeout-ms N --header-timeout-ms N --idle-timeout-ms N
//   --max-connections N --max-tunnels N --log-max-bytes N --policy-poll-ms N --idle-release-ms N --event-loops N
//   --no-records  (no per-connection records: ProxyLimits::connection_records,
//                  which only this runner can turn off, for the benches)
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "egress_proxy/egress_proxy.hpp"
#include "egress_proxy/proxy_arguments.hpp"

namespace proxy_flag = agentctl::egress_proxy::flag;

int main(int argc, char** argv) {
    agentctl::egress_proxy::ProxyOptions options;
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        if (flag == "--no-records") {
            options.limits.connection_records = false;
            continue;
        }
        if (++i == argc) {
            std::cerr << "egress_proxy_runner: " << flag << " needs a value\n";
            return 1;
        }
        std::string value = argv[i];
        auto ms = [&] { return std::chrono::milliseconds(std::stoll(value)); };
        if (flag == proxy_flag::k_listen)
            options.listen = value;
        else if (flag == proxy_flag::k_policy)
            options.policy_file = value;
        else if (flag == proxy_flag::k_pid_file)
            options.pid_file = value;
        else if (flag == proxy_flag::k_log)
            options.log_file = value;
        else if (flag == proxy_flag::k_resolve_file)
            options.resolve_file = value;
        else if (flag == proxy_flag::k_sandbox)
            options.sandbox_name = value;
        else if (flag == "--connect-timeout-ms")
            options.limits.connect_timeout = ms();
        else if (flag == "--header-timeout-ms")
            options.limits.header_timeout = ms();
        else if (flag == "--idle-timeout-ms")
            options.limits.idle_timeout = ms();
        else if (flag == "--max-connections")
            options.limits.max_connections = std::stoul(value);
        else if (flag == proxy_flag::k_max_tunnels)
            options.limits.max_tunnels = std::stoul(value);
        else if (flag == "--policy-poll-ms")
            options.limits.policy_poll = ms();
        else if (flag == "--idle-release-ms")
            options.limits.idle_release = ms();
        else if (flag == proxy_flag::k_event_loops)
            options.limits.event_loops = std::stoul(value);
        else if (flag == "--log-max-bytes")
            options.limits.log_max_bytes = std::stoull(value);
        else {
            std::cerr << "egress_proxy_runner: unknown flag " << flag << "\n";
            return 1;
        }
    }
    return agentctl::egress_proxy::run_egress_proxy(options);
}
