// Where the lima provider keeps its per-instance state, below agentctl's
// state directory (ProviderContext::state_dir, normally ~/.local/state/agentctl):
//
//   lima/NAME/state.json          what agentctl recorded about the instance
//   lima/NAME/egress-policy.json  the egress proxy's policy (atomic writes)
//   lima/NAME/egress-proxy.pid    written by the proxy once it listens
//   lima/NAME/egress-proxy.log    the proxy's decision log (JSON Lines)
//   lima/NAME/.lock               held by every mutating operation
//   lima/NAME/secrets.json        the secrets it uses and their placeholders, never a
//                                 value (provider/common/sandbox_secrets.hpp, 0600)
//   lima/NAME/egress-ca.crt, .key the sandbox CA of TLS termination (the key 0600)
//   lima/NAME/egress-secrets.sock where its running proxy takes new secret values
//
// The CLI reads the network log of a Lima sandbox at egress_log_path().
#pragma once

#include <filesystem>
#include <string>

namespace agentctl::provider::lima {

// lima/: one directory per instance below it.
[[nodiscard]] std::filesystem::path instances_dir(const std::string& state_dir);
[[nodiscard]] std::filesystem::path instance_state_dir(const std::string& state_dir, const std::string& name);
[[nodiscard]] std::filesystem::path state_file_path(const std::string& state_dir, const std::string& name);
[[nodiscard]] std::filesystem::path egress_policy_path(const std::string& state_dir, const std::string& name);
[[nodiscard]] std::filesystem::path egress_pid_path(const std::string& state_dir, const std::string& name);
[[nodiscard]] std::filesystem::path egress_log_path(const std::string& state_dir, const std::string& name);
[[nodiscard]] std::filesystem::path egress_secrets_socket_path(const std::string& state_dir, const std::string& name);
[[nodiscard]] std::filesystem::path lock_file_path(const std::string& state_dir, const std::string& name);

}  // namespace agentctl::provider::lima
