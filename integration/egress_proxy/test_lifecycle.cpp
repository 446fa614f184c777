// Reloading the policy, a broken policy, SIGTERM, and the real binary.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "core/files.hpp"
#include "suite_support.hpp"

using namespace std::chrono_literals;

#define SUITE_REQUIRE_READY()                         \
    if (auto why = suite::skip_reason()) {            \
        WARN("egress proxy suite skipped: " << *why); \
        return;                                       \
    }

namespace {

int status_of(std::uint16_t port, const std::string& authority) {
    suite::Client client(port);
    return suite::connect_through(client, authority).status;
}

bool echo_on(suite::Client& client, const std::string& text) {
    client.send(text);
    return client.read_exact(text.size()) == text;
}

}  // namespace

TEST_CASE("a changed policy file applies to new connections; open tunnels keep theirs") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test b.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7"}));
    suite::Proxy proxy(files);
    CHECK(status_of(proxy.port, "b.test:7") == 403);
    suite::Client tunnel(proxy.port);
    REQUIRE(suite::connect_through(tunnel, "a.test:7").status == 200);

    files.write_policy(suite::policy_allowing({"b.test:7"}));  // atomic replace, noticed by polling
    int b_status = 0;
    for (int i = 0; i < 30 && b_status != 200; ++i) {
        std::this_thread::sleep_for(100ms);
        b_status = status_of(proxy.port, "b.test:7");
    }
    CHECK(b_status == 200);
    CHECK(status_of(proxy.port, "a.test:7") == 403);
    CHECK(echo_on(tunnel, "still open under the old decision"));

    // SIGHUP reloads at once, without waiting for the poll.
    files.write_policy(suite::policy_allowing({"a.test:7", "b.test:7"}));
    proxy.process().signal(SIGHUP);
    std::this_thread::sleep_for(100ms);
    CHECK(status_of(proxy.port, "a.test:7") == 200);
}

TEST_CASE("a missing or malformed policy denies everything, loudly, and the proxy keeps running") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test\n");
    suite::Proxy proxy(files);  // no policy file yet
    suite::Client client(proxy.port);
    auto response = suite::connect_through(client, "a.test:7");
    CHECK(response.status == 403);
    CHECK(response.header("X-Agentctl-Reason") == "policy-unavailable");

    files.write_policy(suite::policy_allowing({"a.test:7"}));
    proxy.process().signal(SIGHUP);
    std::this_thread::sleep_for(100ms);
    CHECK(status_of(proxy.port, "a.test:7") == 200);

    agentctl::core::write_file_atomic(files.policy,
                                      "{\"version\":1,\"allow\":[{\"domain\":\"a.test\",\"ports\":\"x\"}]}");
    proxy.process().signal(SIGHUP);
    std::this_thread::sleep_for(100ms);
    CHECK(status_of(proxy.port, "a.test:7") == 403);
    bool loud = false;
    for (const auto& line : files.log_lines()) {
        if (line.value("event", "") == "policy" && line.value("level", "") == "error" &&
            line.value("message", "").find("DENYING ALL") != std::string::npos) {
            loud = true;
        }
    }
    CHECK(loud);
}

TEST_CASE("SIGTERM closes tunnels, removes the pid file and exits 0") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7"}));
    suite::Proxy proxy(files);
    REQUIRE(std::filesystem::exists(files.pid));
    CHECK(std::stoi(agentctl::core::read_file(files.pid)) == proxy.process().pid());
    suite::Client tunnel(proxy.port);
    REQUIRE(suite::connect_through(tunnel, "a.test:7").status == 200);
    REQUIRE(echo_on(tunnel, "before"));
    proxy.process().signal(SIGTERM);
    CHECK(proxy.process().wait_exit(3s) == 0);
    CHECK(tunnel.closed_by_peer());
    CHECK_FALSE(std::filesystem::exists(files.pid));
    CHECK_THROWS(suite::Client(proxy.port));
}

TEST_CASE("the real binary: agentctl egress-proxy serves and stops the same way") {
    SUITE_REQUIRE_READY();
    if (!std::filesystem::exists(AGENTCTL_BINARY)) {
        WARN("agentctl binary not built: " << AGENTCTL_BINARY);
        return;
    }
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test other.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7"}));
    suite::Proxy proxy(files, {"--sandbox", "box7"}, AGENTCTL_BINARY);
    suite::Client tunnel(proxy.port);
    REQUIRE(suite::connect_through(tunnel, "a.test:7").status == 200);
    CHECK(echo_on(tunnel, "via agentctl"));
    suite::Client refused(proxy.port);
    auto response = suite::connect_through(refused, "other.test:7");
    CHECK(response.status == 403);
    CHECK(response.body.find("agentctl policy add box7 other.test:7") != std::string::npos);
    proxy.process().signal(SIGTERM);
    CHECK(proxy.process().wait_exit(3s) == 0);
    CHECK_FALSE(std::filesystem::exists(files.pid));
}
