#include <catch2/catch.hpp>

#include "egress_proxy/responses.hpp"

using agentctl::egress_proxy::ProxyReason;
using agentctl::egress_proxy::Refusal;
using agentctl::egress_proxy::refusal_response;
using agentctl::policy::Reason;

TEST_CASE("a 403 tells the agent what happened and the command that allows it") {
    auto response = refusal_response(Refusal{403, Reason::NotAllowlisted, "example.org is not on the allowlist"},
                                     "example.org", 443, "dev1");
    CHECK(response.rfind("HTTP/1.1 403 Forbidden\r\n", 0) == 0);
    CHECK(response.find("X-Agentctl-Reason: not-allowlisted\r\n") != std::string::npos);
    CHECK(response.find("Connection: close\r\n") != std::string::npos);
    CHECK(response.find("agentctl policy add dev1 example.org:443") != std::string::npos);
    CHECK(response.find("example.org is not on the allowlist") != std::string::npos);
    auto body_at = response.find("\r\n\r\n") + 4;
    auto length_at = response.find("Content-Length: ") + 16;
    CHECK(std::stoul(response.substr(length_at)) == response.size() - body_at);
}

TEST_CASE("refusals that no rule can lift do not suggest policy add") {
    auto response = refusal_response(Refusal{403, Reason::Loopback, ""}, "127.0.0.1", 22, "dev1");
    CHECK(response.find("policy add") == std::string::npos);
    CHECK(response.find("always refused") != std::string::npos);
    auto sandbox = refusal_response(Refusal{403, Reason::SandboxNetwork, ""}, "10.213.0.18", 22, "dev1");
    CHECK(sandbox.find("X-Agentctl-Reason: sandbox-network\r\n") != std::string::npos);
    CHECK(sandbox.find("policy add") == std::string::npos);
    auto v6 = refusal_response(Refusal{403, Reason::NotAllowlisted, ""}, "2001:db8::1", 443, "dev1");
    CHECK(v6.find("agentctl policy add dev1 [2001:db8::1]:443") != std::string::npos);
}

TEST_CASE("gateway errors carry their own status and reason") {
    auto timeout = refusal_response(Refusal{504, ProxyReason::ConnectTimeout, ""}, "slow.test", 80, "s");
    CHECK(timeout.rfind("HTTP/1.1 504 Gateway Timeout\r\n", 0) == 0);
    CHECK(timeout.find("X-Agentctl-Reason: connect-timeout") != std::string::npos);
    auto bad = refusal_response(Refusal{400, ProxyReason::NotAProxyRequest, "send an absolute URI"}, "", 0, "s");
    CHECK(bad.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
    CHECK(bad.find("send an absolute URI") != std::string::npos);
}

TEST_CASE("a refusal's reason is the policy's or the proxy's own, each with its wire text") {
    using agentctl::egress_proxy::RefusalReason;
    const std::pair<ProxyReason, std::string_view> table[] = {
        {ProxyReason::HeaderTooLarge, "header-too-large"},
        {ProxyReason::MalformedRequest, "malformed-request"},
        {ProxyReason::HeaderTimeout, "header-timeout"},
        {ProxyReason::InvalidTarget, "invalid-target"},
        {ProxyReason::InvalidPort, "invalid-port"},
        {ProxyReason::NotAProxyRequest, "not-a-proxy-request"},
        {ProxyReason::UnsupportedScheme, "unsupported-scheme"},
        {ProxyReason::NameNotResolved, "name-not-resolved"},
        {ProxyReason::ConnectTimeout, "connect-timeout"},
        {ProxyReason::ConnectionRefused, "connection-refused"},
        {ProxyReason::ConnectFailed, "connect-failed"},
        {ProxyReason::BadUpstreamResponse, "bad-upstream-response"},
        {ProxyReason::TunnelLimit, "tunnel-limit"},
    };
    for (const auto& [reason, text] : table) CHECK(to_string(RefusalReason(reason)) == text);
    CHECK(to_string(RefusalReason(Reason::PolicyUnavailable)) == "policy-unavailable");
    CHECK(RefusalReason(Reason::Lan).policy_reason() != nullptr);
    CHECK(RefusalReason(Reason::Lan).proxy_reason() == nullptr);
    auto unavailable = refusal_response(Refusal{403, Reason::PolicyUnavailable, ""}, "example.org", 443, "s");
    CHECK(unavailable.find("X-Agentctl-Reason: policy-unavailable\r\n") != std::string::npos);
    CHECK(unavailable.find("could not read a valid network policy") != std::string::npos);
    auto unresolved = refusal_response(Refusal{502, ProxyReason::NameNotResolved, ""}, "nowhere.test", 443, "s");
    CHECK(unresolved.find("does not resolve; check its spelling") != std::string::npos);
    auto limit = refusal_response(Refusal{503, ProxyReason::TunnelLimit, ""}, "sink.test", 11, "s");
    CHECK(limit.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0) == 0);
    CHECK(limit.find("--max-tunnels") != std::string::npos);
}
