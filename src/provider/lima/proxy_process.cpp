#include "provider/lima/proxy_process.hpp"

#include "provider/common/proxy_process.hpp"

namespace agentctl::provider::lima {

std::vector<std::string> proxy_command(const std::string& self_exe, std::uint16_t port, const ProxyPaths& paths,
                                       bool secrets, uid_t owner) {
    std::vector<std::string> argv{self_exe,   "egress-proxy", "--listen",   "127.0.0.1:" + std::to_string(port),
                                  "--policy", paths.policy,   "--pid-file", paths.pid_file,
                                  "--log",    paths.log};
    if (secrets) {
        argv.insert(argv.end(), {"--secrets-fd", "0", "--secrets-socket", paths.secrets_socket, "--secrets-peer-uid",
                                 std::to_string(owner)});
    }
    return argv;
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
    return common::stop_proxy(pid_file, grace);
}

}  // namespace agentctl::provider::lima
