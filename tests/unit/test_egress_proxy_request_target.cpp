#include <catch2/catch.hpp>

#include "egress_proxy/request_target.hpp"

using agentctl::egress_proxy::parse_request_target;
using agentctl::egress_proxy::ProxyReason;
using agentctl::egress_proxy::RequestKind;
using agentctl::egress_proxy::RequestTarget;
using agentctl::egress_proxy::TargetError;

namespace {

RequestTarget ok(std::string_view method, std::string_view target) {
    auto result = parse_request_target(method, target);
    INFO(method << " " << target);
    REQUIRE(std::holds_alternative<RequestTarget>(result));
    return std::get<RequestTarget>(result);
}

TargetError err(std::string_view method, std::string_view target) {
    auto result = parse_request_target(method, target);
    INFO(method << " " << target);
    REQUIRE(std::holds_alternative<TargetError>(result));
    return std::get<TargetError>(result);
}

}  // namespace

TEST_CASE("CONNECT takes host:port in authority form") {
    auto t = ok("CONNECT", "example.com:443");
    CHECK(t.kind == RequestKind::Connect);
    CHECK(t.host == "example.com");
    CHECK(t.port == 443);
    auto v6 = ok("CONNECT", "[2001:db8::1]:22");
    CHECK(v6.host == "2001:db8::1");
    CHECK(v6.port == 22);
    CHECK(ok("CONNECT", "0x7f.1:80").host == "0x7f.1");  // IP spellings are left to the policy
}

TEST_CASE("CONNECT refuses targets without a usable port") {
    CHECK(err("CONNECT", "example.com").reason == ProxyReason::InvalidTarget);
    CHECK(err("CONNECT", "example.com:0").reason == ProxyReason::InvalidPort);
    CHECK(err("CONNECT", "example.com:65536").reason == ProxyReason::InvalidPort);
    CHECK(err("CONNECT", "example.com:+80").reason == ProxyReason::InvalidPort);
    CHECK(err("CONNECT", "example.com:80x").reason == ProxyReason::InvalidPort);
    CHECK(err("CONNECT", ":443").reason == ProxyReason::InvalidTarget);
    CHECK(err("CONNECT", "[2001:db8::1]").reason == ProxyReason::InvalidTarget);
    CHECK(err("CONNECT", "[zz]:443").reason == ProxyReason::InvalidTarget);
    CHECK(err("CONNECT", "user@example.com:443").reason == ProxyReason::InvalidTarget);
    CHECK(err("CONNECT", "exa mple.com:443").reason == ProxyReason::InvalidTarget);
    CHECK(err("CONNECT", "exa%2fmple.com:443").reason == ProxyReason::InvalidTarget);
}

TEST_CASE("absolute http URIs are forwarded in origin form") {
    auto t = ok("GET", "http://Example.com/a/b?c=d#frag");
    CHECK(t.kind == RequestKind::Forward);
    CHECK(t.host == "Example.com");
    CHECK(t.port == 80);
    CHECK(t.origin_form == "/a/b?c=d");
    CHECK(ok("GET", "http://example.com").origin_form == "/");
    CHECK(ok("GET", "HTTP://example.com:8080?x").origin_form == "/?x");
    CHECK(ok("POST", "http://example.com:8080/").port == 8080);
    CHECK(ok("GET", "http://[::1]:81/x").host == "::1");
}

TEST_CASE("origin-form, https and other schemes are refused with 400") {
    auto origin = err("GET", "/index.html");
    CHECK(origin.status == 400);
    CHECK(origin.reason == ProxyReason::NotAProxyRequest);
    CHECK(err("GET", "https://example.com/").reason == ProxyReason::UnsupportedScheme);
    CHECK(err("GET", "ftp://example.com/").reason == ProxyReason::UnsupportedScheme);
    CHECK(err("GET", "example.com").reason == ProxyReason::InvalidTarget);
    CHECK(err("GET", "http:///path").reason == ProxyReason::InvalidTarget);
    CHECK(err("GET", "http://user:pw@example.com/").reason == ProxyReason::InvalidTarget);
    CHECK(err("GET", "*").reason == ProxyReason::InvalidTarget);
}
