// The answers the proxy writes itself: refusals and errors, each with a body a
// person (or an agent) can act on and a machine-readable X-Agentctl-Reason.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "egress_proxy/refusal_reason.hpp"

namespace agentctl::egress_proxy {

struct Refusal {
    unsigned status = 403;  // 400, 403, 431, 502, 504, ...
    RefusalReason reason;   // e.g. not-allowlisted, name-not-resolved, connect-timeout
    std::string detail;     // one sentence
};

using policy::destination_text;

// A complete HTTP/1.1 response (status line, headers, body) that closes the
// connection. For a 403 the body names the destination, the reason and, when a
// rule could allow it, the exact `agentctl policy add SANDBOX host:port`
// command; `host` may be empty when the request never named one.
[[nodiscard]] std::string refusal_response(const Refusal& refusal, std::string_view host, std::uint16_t port,
                                           std::string_view sandbox);

}  // namespace agentctl::egress_proxy
