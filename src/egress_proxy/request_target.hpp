// What a client asked the proxy for: the pure part of request handling,
// shared by the proxy, its unit tests and the fuzz target. No sockets here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "egress_proxy/refusal_reason.hpp"

namespace agentctl::egress_proxy {

enum class RequestKind {
    Connect,  // CONNECT host:port -> a TCP tunnel
    Forward,  // GET http://host[:port]/path -> plain HTTP forwarding
};

struct RequestTarget {
    RequestKind kind = RequestKind::Connect;
    std::string host;         // as sent, without [ ] around an IPv6 literal
    std::uint16_t port = 0;   // explicit, or 80 for http:// without a port
    std::string origin_form;  // Forward only: `/path?query` sent upstream
};

// A request the proxy will not serve, whatever the policy says.
struct TargetError {
    unsigned status = 400;                            // HTTP status to answer with
    ProxyReason reason = ProxyReason::InvalidTarget;  // for X-Agentctl-Reason and the log
    std::string detail;                               // one sentence for a person
};

// Validates a request line's method and target. CONNECT needs authority form
// (`host:port`, `[v6]:port`); every other method needs an absolute `http://` URI.
// Origin-form targets (`/path`), `https://` URIs, user info, empty hosts, bad
// ports and characters that have no place in a host name are errors.
[[nodiscard]] std::variant<RequestTarget, TargetError> parse_request_target(std::string_view method,
                                                                            std::string_view target);

}  // namespace agentctl::egress_proxy
