#include <catch2/catch.hpp>

#include "egress_proxy/request_screen.hpp"

using agentctl::egress_proxy::ProxyReason;
using agentctl::egress_proxy::screen_request;
using Stage = agentctl::egress_proxy::ScreenResult::Stage;
namespace policy = agentctl::policy;

namespace {

policy::NetworkPolicy test_policy() {
    policy::NetworkPolicy p;
    p.allow.push_back(policy::parse_allow_entry("example.com:443", "--allow"));
    p.allow.push_back(policy::parse_allow_entry("192.0.3.3:80", "--allow"));
    return p;
}

}  // namespace

TEST_CASE("screen_request: bytes to the first decision step, as the proxy parses them") {
    auto p = test_policy();
    auto name = screen_request("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n", p, {}, 8192);
    CHECK(name.stage == Stage::NeedsLookup);
    REQUIRE(name.target);
    CHECK(name.target->host == "example.com");

    auto ip = screen_request("CONNECT 0xc0.0.3.3:80 HTTP/1.1\r\n\r\n", p, {}, 8192);
    REQUIRE(ip.stage == Stage::Decided);
    CHECK(ip.decision->allowed);

    auto loopback = screen_request("GET http://0x7f.1/ HTTP/1.1\r\nHost: x\r\n\r\n", p, {}, 8192);
    REQUIRE(loopback.stage == Stage::Decided);
    CHECK_FALSE(loopback.decision->allowed);
    CHECK(loopback.decision->reason == policy::Reason::Loopback);

    CHECK(screen_request("CONNECT example.com:443 HTTP/1.1\r\nHost: exa", p, {}, 8192).stage == Stage::NeedMore);
    auto origin = screen_request("GET / HTTP/1.1\r\n\r\n", p, {}, 8192);
    REQUIRE(origin.stage == Stage::Rejected);
    CHECK(origin.refusal->status == 400);
    auto garbage = screen_request("\x16\x03\x01 hello\r\n\r\n", p, {}, 8192);
    REQUIRE(garbage.stage == Stage::Rejected);
    CHECK(garbage.refusal->reason == ProxyReason::MalformedRequest);
    std::string big = "GET http://example.com/ HTTP/1.1\r\nX: " + std::string(10000, 'a') + "\r\n\r\n";
    auto oversized = screen_request(big, p, {}, 8192);
    REQUIRE(oversized.stage == Stage::Rejected);
    CHECK(oversized.refusal->status == 431);
}

TEST_CASE("screen_request: head_bytes ends at the head's blank line, leaving what the client sent behind it") {
    auto p = test_policy();
    const std::string head = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n";
    const std::string hello = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";  // the start of a TLS ClientHello
    auto screened = screen_request(head + hello, p, {}, 8192);
    REQUIRE(screened.stage == Stage::NeedsLookup);
    CHECK(screened.head_bytes == head.size());

    const std::string get = "GET http://192.0.3.3/ HTTP/1.1\r\nHost: 192.0.3.3\r\nContent-Length: 4\r\n\r\n";
    auto forwarded = screen_request(get + "body", p, {}, 8192);
    REQUIRE(forwarded.stage == Stage::Decided);
    CHECK(forwarded.head_bytes == get.size());
}
