// Which destinations the proxy lets through, and how it says no.
#include <catch2/catch.hpp>

#include <thread>

#include "suite_support.hpp"

using namespace std::chrono_literals;

namespace {

const char* k_hosts =
    "192.0.3.2 allowed.test a.wild.test b.a.wild.test wild.test unlisted.test multi.test\n"
    "192.0.3.3 web2.test\n"
    "127.0.0.1 rebind-loopback.test multi.test\n"
    "10.231.0.2 rebind-lan.test lan.test\n"
    "192.0.3.1 rebind-host.test\n"
    "::ffff:127.0.0.1 rebind-mapped.test\n"
    "64:ff9b::7f00:1 rebind-nat64.test\n"
    "64:ff9b::a00:1 rebind-nat64-lan.test\n"
    "0.0.0.0 rebind-zero.test\n";

std::vector<std::string> k_rules{
    "allowed.test:7,9", "*.wild.test:7",      "multi.test:7",      "rebind-loopback.test",  "rebind-lan.test",
    "rebind-host.test", "rebind-mapped.test", "rebind-nat64.test", "rebind-nat64-lan.test", "rebind-zero.test",
    "192.0.3.3:80",     "nosuch.invalid:80",  "allowed.test:8080", "allowed.test:81",       "lan.test:80"};

struct Fixture {
    suite::Network network;
    suite::ProxyFiles files;
    std::optional<suite::Proxy> proxy;
    explicit Fixture(bool allow_lan = false) {
        files.write_policy(suite::policy_allowing(k_rules, allow_lan));
        files.write_resolve(k_hosts);
        proxy.emplace(files, std::vector<std::string>{"--connect-timeout-ms", "1000"});
    }
    suite::Client::Response connect(const std::string& authority) {
        suite::Client client(proxy->port);
        return suite::connect_through(client, authority);
    }
    // Opens a tunnel and checks bytes make the round trip through the echo server.
    bool echo_through(const std::string& authority) {
        suite::Client client(proxy->port);
        auto response = suite::connect_through(client, authority);
        if (response.status != 200) return false;
        client.send("ping through " + authority);
        return client.read_exact(13 + authority.size()) == "ping through " + authority;
    }
};

}  // namespace

TEST_CASE("CONNECT is allowed or refused by name, port and wildcard") {
    SUITE_REQUIRE_READY();
    Fixture f;
    CHECK(f.echo_through("allowed.test:7"));
    CHECK(f.echo_through("ALLOWED.test.:9"));
    CHECK(f.echo_through("a.wild.test:7"));
    CHECK(f.echo_through("b.a.wild.test:7"));

    auto port = f.connect("allowed.test:22");
    CHECK(port.status == 403);
    CHECK(port.header("X-Agentctl-Reason") == "port-not-allowed");

    auto name = f.connect("unlisted.test:7");
    CHECK(name.status == 403);
    CHECK(name.header("X-Agentctl-Reason") == "not-allowlisted");
    CHECK(name.body.find("agentctl policy add dev1 unlisted.test:7") != std::string::npos);

    auto apex = f.connect("wild.test:7");  // *.wild.test does not cover the apex
    CHECK(apex.status == 403);
    CHECK(apex.header("X-Agentctl-Reason") == "not-allowlisted");

    auto wild_port = f.connect("a.wild.test:9");
    CHECK(wild_port.status == 403);
    CHECK(wild_port.header("X-Agentctl-Reason") == "port-not-allowed");
}

TEST_CASE("every spelling of a loopback or unspecified address is refused") {
    SUITE_REQUIRE_READY();
    Fixture f;
    std::string p = std::to_string(f.proxy->port);
    for (std::string host :
         {"127.0.0.1", "2130706433", "0x7f.1", "0x7f000001", "0177.0.0.1", "127.1", "127.0.1", "[::1]",
          "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[64:ff9b::7f00:1]", "[0:0:0:0:0:0:0:1]", "localhost"}) {
        auto response = f.connect(host + ":" + p);
        INFO(host);
        CHECK(response.status == 403);
        auto reason = response.header("X-Agentctl-Reason");
        if (host == "localhost") {
            CHECK(reason == "not-allowlisted");
        } else {
            CHECK(reason == "loopback");
        }
    }
    for (std::string host : {"0.0.0.0", "0", "[::]"}) {
        auto response = f.connect(host + ":80");
        INFO(host);
        CHECK(response.status == 403);
        CHECK(response.header("X-Agentctl-Reason") == "unspecified");
    }
}

TEST_CASE("allowed names that resolve to loopback, LAN, host or NAT64 addresses are refused") {
    SUITE_REQUIRE_READY();
    Fixture f;
    const std::vector<std::pair<std::string, std::string>> cases{
        {"rebind-loopback.test:80", "loopback"}, {"rebind-lan.test:80", "lan"},
        {"rebind-host.test:80", "host-address"}, {"rebind-mapped.test:80", "loopback"},
        {"rebind-nat64.test:80", "loopback"},    {"rebind-nat64-lan.test:80", "lan"},
        {"rebind-zero.test:80", "unspecified"}};
    for (const auto& [authority, reason] : cases) {
        auto response = f.connect(authority);
        INFO(authority);
        CHECK(response.status == 403);
        CHECK(response.header("X-Agentctl-Reason") == reason);
        CHECK(response.body.find("policy add") == std::string::npos);
    }
    // A name with a refused and an acceptable address goes to the acceptable one only.
    CHECK(f.echo_through("multi.test:7"));
    auto lines = f.files.log_lines();
    bool dialled_public = false;
    for (const auto& line : lines) {
        if (line.value("host", "") == "multi.test" && line.value("decision", "") == "allow") {
            dialled_public = line.value("address", "") == "192.0.3.2";
        }
    }
    CHECK(dialled_public);
}

TEST_CASE("bare IP addresses pass only when listed, in any spelling") {
    SUITE_REQUIRE_READY();
    Fixture f;
    auto unlisted = f.connect("192.0.3.2:7");
    CHECK(unlisted.status == 403);
    CHECK(unlisted.header("X-Agentctl-Reason") == "bare-ip-not-listed");
    for (std::string spelling : {"192.0.3.3", "3221226243", "0xc0.0x0.0x3.0x3", "[::ffff:192.0.3.3]"}) {
        suite::Client client(f.proxy->port);
        auto response = suite::connect_through(client, spelling + ":80");
        INFO(spelling);
        REQUIRE(response.status == 200);
        client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        auto page = client.read_response();
        CHECK(page.status == 200);
        CHECK(page.body.find("server=192.0.3.3:80") != std::string::npos);
    }
    auto lan_ip = f.connect("10.231.0.2:80");
    CHECK(lan_ip.status == 403);
}

TEST_CASE("LAN destinations: refused by default, open on any port with allow-LAN") {
    SUITE_REQUIRE_READY();
    {
        Fixture f;
        auto by_name = f.connect("lan.test:80");
        CHECK(by_name.status == 403);
        CHECK(by_name.header("X-Agentctl-Reason") == "lan");
        CHECK(f.connect("10.231.0.2:80").status == 403);
    }
    Fixture f(true);
    for (std::string authority : {"10.231.0.2:80", "lan.test:80", "rebind-lan.test:80"}) {
        suite::Client client(f.proxy->port);
        INFO(authority);
        REQUIRE(suite::connect_through(client, authority).status == 200);
        client.send("GET /x HTTP/1.1\r\nHost: lan\r\n\r\n");
        CHECK(client.read_response().body.find("server=10.231.0.2:80") != std::string::npos);
    }
    // allow-LAN never opens loopback or the host's own addresses.
    CHECK(f.connect("rebind-loopback.test:80").header("X-Agentctl-Reason") == "loopback");
    CHECK(f.connect("rebind-host.test:80").header("X-Agentctl-Reason") == "host-address");
}

TEST_CASE("unresolvable names, refused connections and timeouts get 502 and 504") {
    SUITE_REQUIRE_READY();
    Fixture f;
    auto unresolved = f.connect("nosuch.invalid:80");
    CHECK(unresolved.status == 502);
    CHECK(unresolved.header("X-Agentctl-Reason") == "name-not-resolved");

    auto refused = f.connect("allowed.test:8080");
    CHECK(refused.status == 502);
    CHECK(refused.header("X-Agentctl-Reason") == "connection-refused");

    auto started = std::chrono::steady_clock::now();
    auto timeout = f.connect("allowed.test:81");  // the origin's accept queue is full: SYNs are dropped
    auto took = std::chrono::steady_clock::now() - started;
    CHECK(timeout.status == 504);
    CHECK(timeout.header("X-Agentctl-Reason") == "connect-timeout");
    CHECK(took >= 900ms);
    CHECK(took < 3s);
}

TEST_CASE("a destination that answers late is waited for, then tunnelled") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_policy(suite::policy_allowing({"allowed.test:82"}));
    files.write_resolve(k_hosts);
    suite::Proxy proxy(files, {"--connect-timeout-ms", "5000"});
    // The origin drops the proxy's SYN (its accept queue is full) until it is
    // opened; the kernel sends the SYN again about a second after the first,
    // so the proxy's connect(2) is still in progress when it first asks.
    std::thread opener([&network] {
        std::this_thread::sleep_for(300ms);
        network.open_late_origin();
    });
    suite::Client client(proxy.port);
    auto started = std::chrono::steady_clock::now();
    auto response = suite::connect_through(client, "allowed.test:82");
    auto took = std::chrono::steady_clock::now() - started;
    opener.join();
    CHECK(response.status == 200);
    CHECK(took >= 900ms);  // the SYN was sent again: the proxy waited for the handshake
    client.send("late ping");
    CHECK(client.read_exact(9) == "late ping");
}

TEST_CASE("each decision and each closed tunnel is one log line") {
    SUITE_REQUIRE_READY();
    Fixture f;
    {
        suite::Client client(f.proxy->port);
        REQUIRE(suite::connect_through(client, "allowed.test:7").status == 200);
        client.send(std::string(1000, 'a'));
        CHECK(client.read_exact(1000).size() == 1000);
    }
    CHECK(f.connect("unlisted.test:7").status == 403);
    std::this_thread::sleep_for(200ms);
    auto lines = f.files.log_lines();
    const nlohmann::json* allow = nullptr;
    const nlohmann::json* deny = nullptr;
    const nlohmann::json* close = nullptr;
    for (const auto& line : lines) {
        if (line.value("event", "") == "decision" && line.value("decision", "") == "allow") allow = &line;
        if (line.value("event", "") == "decision" && line.value("decision", "") == "deny") deny = &line;
        if (line.value("event", "") == "close") close = &line;
    }
    REQUIRE(allow);
    CHECK((*allow)["method"] == "CONNECT");
    CHECK((*allow)["host"] == "allowed.test");
    CHECK((*allow)["port"] == 7);
    CHECK((*allow)["address"] == "192.0.3.2");
    CHECK((*allow)["rule"] == "allowed.test:7,9");
    CHECK((*allow)["origin"] == "--allow");
    CHECK((*allow).contains("dns_ms"));
    CHECK((*allow).contains("connect_ms"));
    CHECK((*allow)["client"].get<std::string>().rfind("127.0.0.1:", 0) == 0);
    REQUIRE(deny);
    CHECK((*deny)["reason"] == "not-allowlisted");
    CHECK((*deny)["status"] == 403);
    REQUIRE(close);
    CHECK((*close)["bytes_up"] == 1000);
    CHECK((*close)["bytes_down"] == 1000);
    CHECK((*close).contains("duration_ms"));
}
