// Why the proxy refused or could not serve a connection, for machines: a
// policy decision's reason, or one of the proxy's own. Its wire text is the
// access log's `reason` field and the X-Agentctl-Reason header.
#pragma once

#include <string_view>
#include <variant>

#include "agentctl/policy.hpp"

namespace agentctl::egress_proxy {

// The refusals that come from the proxy itself, not from the policy.
enum class ProxyReason {
    HeaderTooLarge,       // "header-too-large" (431)
    MalformedRequest,     // "malformed-request" (400)
    HeaderTimeout,        // "header-timeout" (408)
    InvalidTarget,        // "invalid-target" (400)
    InvalidPort,          // "invalid-port" (400)
    NotAProxyRequest,     // "not-a-proxy-request" (400)
    UnsupportedScheme,    // "unsupported-scheme" (400)
    NameNotResolved,      // "name-not-resolved" (502)
    ConnectTimeout,       // "connect-timeout" (504)
    ConnectionRefused,    // "connection-refused" (502)
    ConnectFailed,        // "connect-failed" (502)
    BadUpstreamResponse,  // "bad-upstream-response" (502)
    TunnelLimit,          // "tunnel-limit" (503): the sandbox has ProxyLimits::max_tunnels open already
    SecretMisplaced,      // "secret-misplaced" (403): a secret's placeholder where that secret does not go
    UpstreamUntrusted,    // "upstream-untrusted" (502): a terminated host's certificate did not verify
    BudgetSpent,          // "upload-budget-spent" (429): the destination's upload budget is used up
};

[[nodiscard]] std::string_view to_string(ProxyReason reason);

class RefusalReason {
public:
    RefusalReason(policy::Reason reason) : m_reason(reason) {}  // NOLINT: either kind converts
    RefusalReason(ProxyReason reason) : m_reason(reason) {}     // NOLINT

    // Exactly one of these is set.
    [[nodiscard]] const policy::Reason* policy_reason() const { return std::get_if<policy::Reason>(&m_reason); }
    [[nodiscard]] const ProxyReason* proxy_reason() const { return std::get_if<ProxyReason>(&m_reason); }
    friend bool operator==(const RefusalReason&, const RefusalReason&) = default;

private:
    std::variant<policy::Reason, ProxyReason> m_reason;
};

// The wire text: policy::to_string or the ProxyReason's.
[[nodiscard]] std::string_view to_string(const RefusalReason& reason);

}  // namespace agentctl::egress_proxy
