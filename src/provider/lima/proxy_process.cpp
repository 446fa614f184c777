#include "provider/lima/proxy_process.hpp"

#include "egress_proxy/proxy_arguments.hpp"
#include "provider/common/proxy_process.hpp"

namespace agentctl::provider::lima {

std::vector<std::string> proxy_command(const std::string& self_exe, std::uint16_t port, const ProxyPaths& paths,
                                       bool secrets, uid_t owner) {
    egress_proxy::ProxyOptions proxy;
    proxy.listen = "127.0.0.1:" + std::to_string(port);
    proxy.policy_file = paths.policy;
    proxy.pid_file = paths.pid_file;
    proxy.log_file = paths.log;
    if (secrets) {
        proxy.secrets_fd = 0;
        proxy.secrets_socket = paths.secrets_socket;
        proxy.secrets_peer_uid = static_cast<long>(owner);
    }
    return egress_proxy::proxy_command(self_exe, proxy);
}

int start_detached_proxy(const std::vector<std::string>& argv, const std::string& output, const std::string& pid_file,
                         std::uint16_t port, const std::string& input, std::chrono::milliseconds timeout) {
    common::SpawnOptions options;
    options.output = output;
    options.input = input;
    return common::start_detached_proxy(argv, options, pid_file, "127.0.0.1", port, timeout);
}

int running_proxy_pid(const std::string& pid_file) { return common::running_proxy_pid(pid_file); }

bool stop_proxy(const std::string& pid_file, std::chrono::milliseconds grace) {
    return common::stop_proxy(pid_file, grace).has_value();
}

}  // namespace agentctl::provider::lima
