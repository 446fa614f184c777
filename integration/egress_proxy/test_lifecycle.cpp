// Reloading the policy, a broken policy, SIGTERM, and the real binary.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

#include "core/files.hpp"
#include "suite_support.hpp"
#include "support/build_paths.hpp"

using namespace std::chrono_literals;

namespace {

int status_of(std::uint16_t port, const std::string& authority) {
    suite::Client client(port);
    return suite::connect_through(client, authority).status;
}

}  // namespace

TEST_CASE("a changed policy file applies to new connections and closes tunnels it no longer allows") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test b.test c.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7", "c.test:7"}));
    suite::Proxy proxy(files);
    CHECK(status_of(proxy.port, "b.test:7") == 403);
    suite::Client tunnel(proxy.port);
    REQUIRE(suite::connect_through(tunnel, "a.test:7").status == 200);
    suite::Client kept(proxy.port);
    REQUIRE(suite::connect_through(kept, "c.test:7").status == 200);

    files.write_policy(suite::policy_allowing({"b.test:7", "c.test:7"}));  // atomic replace, noticed by polling
    int b_status = 0;
    for (int i = 0; i < 30 && b_status != 200; ++i) {
        std::this_thread::sleep_for(100ms);
        b_status = status_of(proxy.port, "b.test:7");
    }
    CHECK(b_status == 200);
    CHECK(status_of(proxy.port, "a.test:7") == 403);
    CHECK(tunnel.closed_by_peer());  // a.test is no longer allowed: its tunnel is gone
    CHECK(suite::echo_on(kept, "c.test is still allowed"));
}

TEST_CASE("SIGHUP reloads at once and promptly closes a tunnel whose rule was removed") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test c.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7", "c.test:7"}));
    suite::Proxy proxy(files, {"--policy-poll-ms", "600000"});  // only the signal can reload here
    suite::Client tunnel(proxy.port, 2s);
    REQUIRE(suite::connect_through(tunnel, "a.test:7").status == 200);
    REQUIRE(suite::echo_on(tunnel, "before the reload"));
    suite::Client kept(proxy.port);
    REQUIRE(suite::connect_through(kept, "c.test:7").status == 200);
    suite::Client keep_alive(proxy.port);  // plain HTTP keep-alive with an open upstream to a.test:80
    files.write_policy(suite::policy_allowing({"a.test:7", "a.test:80", "c.test:7"}));
    proxy.process().signal(SIGHUP);
    std::this_thread::sleep_for(100ms);
    keep_alive.send("GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n");
    REQUIRE(keep_alive.read_response().status == 200);

    files.write_policy(suite::policy_allowing({"c.test:7"}));
    auto signalled = std::chrono::steady_clock::now();
    proxy.process().signal(SIGHUP);
    CHECK(tunnel.closed_by_peer());
    CHECK(std::chrono::steady_clock::now() - signalled < 1s);
    CHECK(keep_alive.closed_by_peer());
    CHECK(suite::echo_on(kept, "c.test is still allowed"));
    int revoked = 0;
    for (const auto& line : files.log_lines()) {
        if (line.value("event", "") == "close" && line.value("ended", "") == "revoked") {
            CHECK(line.value("reason", "") == "not-allowlisted");
            CHECK(line.value("host", "") == "a.test");
            ++revoked;
        }
    }
    CHECK(revoked == 2);
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
    REQUIRE(suite::echo_on(tunnel, "before"));
    proxy.process().signal(SIGTERM);
    CHECK(proxy.process().wait_exit(3s) == 0);
    CHECK(tunnel.closed_by_peer());
    CHECK_FALSE(std::filesystem::exists(files.pid));
    CHECK_THROWS(suite::Client(proxy.port));
}

TEST_CASE("SIGTERM right after a burst of decisions loses no log line") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test other.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7"}));
    suite::Proxy proxy(files);
    constexpr int k_requests = 300;
    for (int i = 0; i < k_requests; ++i) {
        suite::Client client(proxy.port);
        CHECK(suite::connect_through(client, i % 3 == 0 ? "a.test:7" : "other.test:7").status ==
              (i % 3 == 0 ? 200 : 403));
    }
    proxy.process().signal(SIGTERM);  // within the log's batching interval of the last decision
    REQUIRE(proxy.process().wait_exit(3s) == 0);
    // Each decision is logged, or (refusals past the per-second share) counted
    // in the summary line written as the proxy stops.
    long long decisions = 0;
    bool stopped = false;
    for (const auto& line : files.log_lines()) {
        if (line.value("event", "") == "decision") ++decisions;
        if (line.value("event", "") == "refusals-suppressed") decisions += line.value("suppressed", 0LL);
        if (line.value("event", "") == "stop") stopped = true;
    }
    CHECK(decisions == k_requests);
    CHECK(stopped);
}

TEST_CASE("the proxy listens only on loopback or an agentctl sandbox bridge") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_policy(suite::policy_allowing({"a.test:7"}));
    const std::string base = std::string(suite::runner_bin()) + " --policy " + files.policy.string() + " --listen ";
    std::string output;
    // The host end of the suite's veth pair: an address of this machine, but not a sandbox bridge.
    CHECK(suite::run_capture(base + suite::Network::k_host_side + ":0", output) == 1);
    CHECK_THAT(output, Catch::Contains("refusing to listen on 192.0.3.1 (interface ag11x"));
    CHECK_THAT(output, Catch::Contains("only on loopback or on an agentctl sandbox bridge (agc-...)"));
    CHECK(suite::run_capture(base + "0.0.0.0:0", output) == 1);
    CHECK_THAT(output, Catch::Contains("(every interface)"));
    CHECK(suite::run_capture(base + "192.0.3.99:0", output) == 1);
    CHECK_THAT(output, Catch::Contains("(no interface of this machine)"));

    // An interface named like a sandbox bridge (agc-...): its address is accepted.
    const std::string id = std::to_string(::getpid() % 100000);
    const std::string bridge = "agc-t11" + id;
    suite::run_capture("ip link del " + bridge, output);
    REQUIRE(suite::run_capture("ip link add " + bridge + " type veth peer name ag11p" + id, output) == 0);
    struct Remove {
        std::string link;
        ~Remove() {
            std::string ignored;
            suite::run_capture("ip link del " + link, ignored);
        }
    } remove{bridge};
    REQUIRE(suite::run_capture("ip addr add 11.211.0.1/30 dev " + bridge, output) == 0);
    suite::Proxy on_bridge(files, {"--listen", "11.211.0.1:0"});
    CHECK(on_bridge.port != 0);
    on_bridge.process().signal(SIGTERM);
    CHECK(on_bridge.process().wait_exit(3s) == 0);
}

TEST_CASE("an idle proxy gives up the code its last connections ran, and serves the next connection") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test other.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7", "a.test:80"}));
    suite::Proxy proxy(files, {"--policy-poll-ms", "50", "--idle-release-ms", "300"});
    const pid_t pid = proxy.process().pid();
    std::size_t busy = 0;
    {
        // A tunnel, a refusal and a plain request run code all over the proxy.
        suite::Client tunnel(proxy.port);
        REQUIRE(suite::connect_through(tunnel, "a.test:7").status == 200);
        REQUIRE(suite::echo_on(tunnel, "busy"));
        CHECK(status_of(proxy.port, "other.test:7") == 403);
        suite::Client plain(proxy.port);
        plain.send("GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n");
        REQUIRE(plain.read_response().status == 200);
        busy = suite::executable_code_kib(pid).resident;
    }
    // Both connections are closed: 300 ms later the proxy gives the pages up.
    std::size_t idle = busy;
    for (const auto deadline = std::chrono::steady_clock::now() + 10s;
         idle * 2 >= busy && std::chrono::steady_clock::now() < deadline;) {
        std::this_thread::sleep_for(20ms);
        idle = suite::executable_code_kib(pid).resident;
    }
    INFO("code resident: " << busy << " KiB after the connections, " << idle << " KiB once idle");
    CHECK(idle * 2 < busy);
    // What it gave up is mapped again from the same file when needed.
    suite::Client next(proxy.port);
    REQUIRE(suite::connect_through(next, "a.test:7").status == 200);
    CHECK(suite::echo_on(next, "after the release"));
    CHECK(status_of(proxy.port, "other.test:7") == 403);
}

TEST_CASE("the real binary: agentctl egress-proxy serves and stops the same way, idle with little of its code mapped") {
    SUITE_REQUIRE_READY();
    if (!std::filesystem::exists(agentctl::test::agentctl_binary())) {
        WARN("agentctl binary not built: " << agentctl::test::agentctl_binary());
        return;
    }
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test other.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7"}));
    suite::Proxy proxy(files, {"--sandbox", "box7"}, agentctl::test::agentctl_binary());
    // Start-up runs code all over the executable once; the proxy gives up its
    // mappings of it before it says it listens (release_unwritten_file_pages),
    // so idle it keeps resident little more than what its event loops run.
    const auto code = suite::executable_code_kib(proxy.process().pid());
    INFO("idle: " << code.resident << " KiB of " << code.size << " KiB of code resident");
    CHECK(code.size > 0);
    CHECK(code.resident * 3 < code.size);
    suite::Client tunnel(proxy.port);
    REQUIRE(suite::connect_through(tunnel, "a.test:7").status == 200);
    CHECK(suite::echo_on(tunnel, "via agentctl"));
    suite::Client refused(proxy.port);
    auto response = suite::connect_through(refused, "other.test:7");
    CHECK(response.status == 403);
    CHECK(response.body.find("agentctl policy add box7 other.test:7") != std::string::npos);
    // Start-up: the proxy never loads OpenSSL (only the HTTPS transport to a
    // remote Incus server opens it, on first use: openssl_on_demand.hpp).
    const std::string mapped = agentctl::core::read_file("/proc/" + std::to_string(proxy.process().pid()) + "/maps");
    CHECK(mapped.find("/libc.so") != std::string::npos);  // the maps were read
    CHECK(mapped.find("libssl") == std::string::npos);
    CHECK(mapped.find("libcrypto") == std::string::npos);
    proxy.process().signal(SIGTERM);
    CHECK(proxy.process().wait_exit(3s) == 0);
    CHECK_FALSE(std::filesystem::exists(files.pid));
}
