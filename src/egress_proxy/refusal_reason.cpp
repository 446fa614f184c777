#include "egress_proxy/refusal_reason.hpp"

namespace agentctl::egress_proxy {

std::string_view to_string(ProxyReason reason) {
    switch (reason) {
        case ProxyReason::HeaderTooLarge: return "header-too-large";
        case ProxyReason::MalformedRequest: return "malformed-request";
        case ProxyReason::HeaderTimeout: return "header-timeout";
        case ProxyReason::InvalidTarget: return "invalid-target";
        case ProxyReason::InvalidPort: return "invalid-port";
        case ProxyReason::NotAProxyRequest: return "not-a-proxy-request";
        case ProxyReason::UnsupportedScheme: return "unsupported-scheme";
        case ProxyReason::NameNotResolved: return "name-not-resolved";
        case ProxyReason::ConnectTimeout: return "connect-timeout";
        case ProxyReason::ConnectionRefused: return "connection-refused";
        case ProxyReason::ConnectFailed: return "connect-failed";
        case ProxyReason::BadUpstreamResponse: return "bad-upstream-response";
        case ProxyReason::TunnelLimit: return "tunnel-limit";
        case ProxyReason::SecretMisplaced: return "secret-misplaced";
        case ProxyReason::UpstreamUntrusted: return "upstream-untrusted";
        case ProxyReason::BudgetSpent: return "upload-budget-spent";
    }
    return "unknown";
}

std::string_view to_string(const RefusalReason& reason) {
    if (const auto* decided = reason.policy_reason()) return policy::to_string(*decided);
    return to_string(*reason.proxy_reason());
}

}  // namespace agentctl::egress_proxy
