#include <catch2/catch.hpp>

#include "egress_proxy/responses.hpp"

using agentctl::egress_proxy::Refusal;
using agentctl::egress_proxy::refusal_response;

TEST_CASE("a 403 tells the agent what happened and the command that allows it") {
    auto response = refusal_response(Refusal{403, "not-allowlisted", "example.org is not on the allowlist"},
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
    auto response = refusal_response(Refusal{403, "loopback", ""}, "127.0.0.1", 22, "dev1");
    CHECK(response.find("policy add") == std::string::npos);
    CHECK(response.find("always refused") != std::string::npos);
    auto v6 = refusal_response(Refusal{403, "not-allowlisted", ""}, "2001:db8::1", 443, "dev1");
    CHECK(v6.find("agentctl policy add dev1 [2001:db8::1]:443") != std::string::npos);
}

TEST_CASE("gateway errors carry their own status and reason") {
    auto timeout = refusal_response(Refusal{504, "connect-timeout", ""}, "slow.test", 80, "s");
    CHECK(timeout.rfind("HTTP/1.1 504 Gateway Timeout\r\n", 0) == 0);
    CHECK(timeout.find("X-Agentctl-Reason: connect-timeout") != std::string::npos);
    auto bad = refusal_response(Refusal{400, "not-a-proxy-request", "send an absolute URI"}, "", 0, "s");
    CHECK(bad.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
    CHECK(bad.find("send an absolute URI") != std::string::npos);
}
