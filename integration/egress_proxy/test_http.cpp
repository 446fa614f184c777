// Plain HTTP forwarding and requests the proxy must refuse before any decision.
#include <catch2/catch.hpp>

#include <poll.h>

#include <thread>

#include "suite_support.hpp"

using namespace std::chrono_literals;

namespace {

struct Fixture {
    suite::Network network;
    suite::ProxyFiles files;
    std::optional<suite::Proxy> proxy;
    Fixture() {
        files.write_policy(suite::policy_allowing({"web.test:80", "web2.test:80"}));
        files.write_resolve("192.0.3.2 web.test other.test\n192.0.3.3 web2.test\n");
        proxy.emplace(files, std::vector<std::string>{"--header-timeout-ms", "1000"});
    }
};

}  // namespace

TEST_CASE("plain HTTP: keep-alive to two hosts on one client connection, each decided") {
    SUITE_REQUIRE_READY();
    Fixture f;
    suite::Client client(f.proxy->port);
    client.send("GET http://web.test/first?q=1 HTTP/1.1\r\nHost: web.test\r\nProxy-Connection: keep-alive\r\n\r\n");
    auto first = client.read_response();
    CHECK(first.status == 200);
    CHECK(first.body.find("server=192.0.3.2:80") != std::string::npos);
    CHECK(first.body.find("target=/first?q=1") != std::string::npos);
    CHECK(first.body.find("host=web.test ") != std::string::npos);
    CHECK(first.body.find("proxy-connection= ") != std::string::npos);  // hop-by-hop field removed

    client.send("GET http://web2.test:80/second HTTP/1.1\r\nHost: web2.test\r\n\r\n");
    auto second = client.read_response();
    CHECK(second.status == 200);
    CHECK(second.body.find("server=192.0.3.3:80") != std::string::npos);

    client.send("GET http://web.test/third HTTP/1.1\r\nHost: web.test\r\n\r\n");
    CHECK(client.read_response().body.find("server=192.0.3.2:80") != std::string::npos);

    client.send("GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n");
    auto refused = client.read_response();
    CHECK(refused.status == 403);
    CHECK(refused.header("X-Agentctl-Reason") == "not-allowlisted");
    CHECK(client.closed_by_peer());

    std::this_thread::sleep_for(100ms);
    int decisions = 0;
    for (const auto& line : f.files.log_lines()) {
        if (line.value("event", "") == "decision" && line.value("method", "") == "GET") ++decisions;
    }
    CHECK(decisions == 4);
}

TEST_CASE("plain HTTP: pipelined requests, chunked bodies both ways") {
    SUITE_REQUIRE_READY();
    Fixture f;
    suite::Client client(f.proxy->port);
    client.send(
        "GET http://web.test/a HTTP/1.1\r\nHost: web.test\r\n\r\n"
        "POST http://web.test/b HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        "GET http://web2.test/chunked/70000 HTTP/1.1\r\nHost: web2.test\r\n\r\n");
    auto a = client.read_response();
    CHECK(a.body.find("target=/a ") != std::string::npos);
    auto b = client.read_response();
    CHECK(b.body.find("method=POST target=/b") != std::string::npos);
    CHECK(b.body.find("body=11") != std::string::npos);
    auto c = client.read_response();
    CHECK(c.status == 200);
    CHECK(c.header("Transfer-Encoding") == "chunked");
    CHECK(c.body.size() == 70000);

    client.send("GET http://web.test/bytes/3000000 HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n");
    auto big = client.read_response();
    CHECK(big.body.size() == 3000000);
    CHECK(client.closed_by_peer());
}

TEST_CASE("origin-form, malformed and oversized requests get a 4xx and a closed connection") {
    SUITE_REQUIRE_READY();
    Fixture f;
    {
        suite::Client client(f.proxy->port);
        client.send("GET /index.html HTTP/1.1\r\nHost: web.test\r\n\r\n");
        auto r = client.read_response();
        CHECK(r.status == 400);
        CHECK(r.header("X-Agentctl-Reason") == "not-a-proxy-request");
        CHECK(client.closed_by_peer());
    }
    for (const std::string& garbage :
         {std::string("HELLO\r\n\r\n"), std::string("GET http://web.test/ HTTP/9.9\r\n\r\n"),
          std::string("GET http://web.test/ HTTP/1.1\r\nBad Header\r\n\r\n"),
          std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15)}) {
        suite::Client client(f.proxy->port);
        client.send(garbage);
        auto r = client.read_response();
        INFO(garbage);
        CHECK(r.status == 400);
        CHECK(client.closed_by_peer());
    }
    {
        suite::Client client(f.proxy->port);
        client.send("GET https://web.test/ HTTP/1.1\r\nHost: web.test\r\n\r\n");
        CHECK(client.read_response().header("X-Agentctl-Reason") == "unsupported-scheme");
    }
    {
        suite::Client client(f.proxy->port);
        std::string big = "GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\n";
        for (int i = 0; i < 1000; ++i) big += "X-Filler-" + std::to_string(i) + ": " + std::string(60, 'f') + "\r\n";
        big += "\r\n";
        try {
            client.send(big);
        } catch (const std::exception&) {
            // the proxy may close before the whole head is sent
        }
        auto r = client.read_response();
        CHECK(r.status == 431);
        CHECK(client.closed_by_peer());
    }
}

TEST_CASE("slowloris: a head that never completes is cut off at the header timeout") {
    SUITE_REQUIRE_READY();
    Fixture f;
    suite::Client slow(f.proxy->port, 4s);
    auto started = std::chrono::steady_clock::now();
    slow.send("CONNECT web.test:80 HTTP/1.1\r\n");
    bool cut = false;
    for (int i = 0; i < 40; ++i) {  // one header byte every 100 ms, never the blank line
        try {
            slow.send("X");
        } catch (const std::exception&) {
            cut = true;
            break;
        }
        pollfd p{slow.fd(), POLLIN, 0};
        if (::poll(&p, 1, 100) > 0) {
            cut = true;
            break;
        }
    }
    auto took = std::chrono::steady_clock::now() - started;
    CHECK(cut);
    CHECK(took >= 900ms);
    CHECK(took < 2500ms);
    // Meanwhile and afterwards, the proxy serves others.
    suite::Client other(f.proxy->port);
    other.send("GET http://web.test/ok HTTP/1.1\r\nHost: web.test\r\n\r\n");
    CHECK(other.read_response().status == 200);
}
