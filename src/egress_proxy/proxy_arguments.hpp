// The command line of `agentctl egress-proxy`, written in one place: every
// provider that starts a proxy builds it with proxy_command(), and the hidden
// verb reads it by the flag names below (cli/cmd_egress_proxy.cpp), so the two
// ends cannot drift apart (a unit test parses what proxy_command writes).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "egress_proxy/egress_proxy.hpp"

namespace agentctl::egress_proxy {

// The hidden verb: `agentctl egress-proxy FLAGS...`. A running proxy is found
// by it in its command line (provider/common/proxy_process.hpp).
inline constexpr std::string_view k_verb = "egress-proxy";

// Each ProxyOptions field the verb takes, by its flag.
namespace flag {
inline constexpr std::string_view k_listen = "--listen";
inline constexpr std::string_view k_policy = "--policy";
inline constexpr std::string_view k_pid_file = "--pid-file";
inline constexpr std::string_view k_log = "--log";
inline constexpr std::string_view k_resolve_file = "--resolve-file";
inline constexpr std::string_view k_sandbox = "--sandbox";
inline constexpr std::string_view k_event_loops = "--event-loops";
inline constexpr std::string_view k_max_tunnels = "--max-tunnels";
inline constexpr std::string_view k_secrets_fd = "--secrets-fd";
inline constexpr std::string_view k_secrets_socket = "--secrets-socket";
inline constexpr std::string_view k_secrets_peer_uid = "--secrets-peer-uid";
inline constexpr std::string_view k_upstream_ca = "--upstream-ca";
inline constexpr std::string_view k_companion = "--companion";
inline constexpr std::string_view k_server_routes = "--server-routes";
}  // namespace flag

// `PROGRAM egress-proxy FLAGS...` that runs a proxy with `options`: every field
// above that differs from a default ProxyOptions, as its flag and value (of
// ProxyLimits, the verb takes max_tunnels and event_loops; the rest keep their
// defaults).
[[nodiscard]] std::vector<std::string> proxy_command(const std::string& program, const ProxyOptions& options);

}  // namespace agentctl::egress_proxy
