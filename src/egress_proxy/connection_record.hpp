// The `close` line: one record per connection from the proxy to a destination,
// written when that connection ends. Its field names live here, once: the
// proxy writes them (Session::log_upstream_closed) and `logs --network
// --summary` reads them (log_summary.cpp).
#pragma once

#include <string_view>

namespace agentctl::egress_proxy::record {

inline constexpr std::string_view k_event = "close";  // the "event" of the record
inline constexpr const char* k_sandbox = "sandbox";
inline constexpr const char* k_start = "start";  // RFC 3339 UTC; the line's "time" is its end
inline constexpr const char* k_host = "host";    // the name the sandbox asked for
inline constexpr const char* k_port = "port";
inline constexpr const char* k_address = "address";        // the address dialled
inline constexpr const char* k_rule = "rule";              // the allow rule, in `--allow` form
inline constexpr const char* k_origin = "origin";          // where that rule came from
inline constexpr const char* k_bytes_up = "bytes_up";      // sent by the sandbox to the destination
inline constexpr const char* k_bytes_down = "bytes_down";  // sent by the destination to the sandbox
inline constexpr const char* k_duration_ms = "duration_ms";
inline constexpr const char* k_ended = "ended";    // an Ending, below
inline constexpr const char* k_reason = "reason";  // with `revoked`: why the new policy refuses it

// How a connection ended.
enum class Ending {
    Closed,       // the sandbox or the destination closed it, or a request failed
    Revoked,      // a policy change or reload no longer allows the destination
    IdleTimeout,  // no bytes either way for limits.idle_timeout
    ProxyStop,    // the proxy was stopped
    Budget,       // the destination's upload budget ran out
};

[[nodiscard]] constexpr std::string_view to_string(Ending ending) {
    switch (ending) {
        case Ending::Closed: return "closed";
        case Ending::Revoked: return "revoked";
        case Ending::IdleTimeout: return "idle-timeout";
        case Ending::ProxyStop: return "proxy-stop";
        case Ending::Budget: return "budget";
    }
    return "closed";
}

}  // namespace agentctl::egress_proxy::record
