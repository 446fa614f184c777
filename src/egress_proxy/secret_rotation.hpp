// `secret set NAME` on a running sandbox: the new value reaches its egress
// proxy over a Unix socket in the proxy's own run directory (`--secrets-socket`),
// never by argument, environment or a file, and without a restart. agentctl
// (root) connects, writes the same payload the proxy read at start
// (secret_injection.hpp) and shuts its side; the proxy takes the new values
// for the secrets it already has (placeholders and hosts stay as they were)
// and answers one line. Only root may connect (SO_PEERCRED; getpeereid off
// Linux), and the one uid `--secrets-peer-uid` names: another process of the
// proxy's uid cannot set a value unless that uid is named.
#pragma once

#include <string>

namespace agentctl::egress_proxy {

// The proxy's answer: "rotated NAME,NAME" (the names whose value changed; may
// be none: "rotated"), or "refused: WHY". Throws agentctl::Error naming the
// socket when it cannot connect or gets no answer within a few seconds.
[[nodiscard]] std::string send_secret_rotation(const std::string& socket_path, const std::string& payload);

}  // namespace agentctl::egress_proxy
