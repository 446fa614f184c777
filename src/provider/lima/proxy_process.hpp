// Starting and stopping a sandbox's egress proxy: `agentctl egress-proxy`
// re-run from ProviderContext::self_exe, detached (double fork + setsid) so it
// outlives the agentctl command that started it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace agentctl::provider::lima {

struct ProxyPaths {
    std::string policy;
    std::string pid_file;
    std::string log;
    std::string secrets_socket;  // where it takes new secret values (a sandbox with secrets)
};

// `SELF egress-proxy --listen 127.0.0.1:PORT --policy P --pid-file F --log L`; for a sandbox with secrets also
// `--secrets-fd 0
// --secrets-socket S --secrets-peer-uid OWNER` (the secrets and the sandbox
// CA come on its stdin; OWNER, the user agentctl runs as, may hand it new values).
[[nodiscard]] std::vector<std::string> proxy_command(const std::string& self_exe, std::uint16_t port,
                                                     const ProxyPaths& paths, bool secrets = false, uid_t owner = 0);

// Starts `argv` detached from this process (new session, stdin a pipe holding
// `input` when it is not empty, else /dev/null, stdout/stderr appended to
// `output`), then waits until `pid_file` names a live process and
// 127.0.0.1:port accepts connections. Returns that pid. On timeout (or if the
// process dies) kills what it started and throws agentctl::Error quoting the
// last lines of `output`.
int start_detached_proxy(const std::vector<std::string>& argv, const std::string& output, const std::string& pid_file,
                         std::uint16_t port, const std::string& input = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds(10));

// The pid in `pid_file` if that process is alive, else 0.
[[nodiscard]] int running_proxy_pid(const std::string& pid_file);

// common::stop_proxy: true if a proxy was running. Never throws.
bool stop_proxy(const std::string& pid_file, std::chrono::milliseconds grace = std::chrono::seconds(5));

}  // namespace agentctl::provider::lima
