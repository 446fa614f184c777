#include "provider/lima/lima_paths.hpp"

namespace agentctl::provider::lima {

std::filesystem::path instances_dir(const std::string& state_dir) { return std::filesystem::path(state_dir) / "lima"; }

std::filesystem::path instance_state_dir(const std::string& state_dir, const std::string& name) {
    return instances_dir(state_dir) / name;
}

std::filesystem::path state_file_path(const std::string& state_dir, const std::string& name) {
    return instance_state_dir(state_dir, name) / "state.json";
}

std::filesystem::path egress_policy_path(const std::string& state_dir, const std::string& name) {
    return instance_state_dir(state_dir, name) / "egress-policy.json";
}

std::filesystem::path egress_pid_path(const std::string& state_dir, const std::string& name) {
    return instance_state_dir(state_dir, name) / "egress-proxy.pid";
}

std::filesystem::path egress_log_path(const std::string& state_dir, const std::string& name) {
    return instance_state_dir(state_dir, name) / "egress-proxy.log";
}

std::filesystem::path egress_secrets_socket_path(const std::string& state_dir, const std::string& name) {
    return instance_state_dir(state_dir, name) / "egress-secrets.sock";
}

std::filesystem::path lock_file_path(const std::string& state_dir, const std::string& name) {
    return instance_state_dir(state_dir, name) / ".lock";
}

}  // namespace agentctl::provider::lima
