// The proxy's event loops: one listener hands each connection to the loop
// serving the fewest, loop 0 on a tie (Server::accept_loop), so with two loops
// connections that stay open alternate between the two threads; each decision
// line names its loop. What must hold across loops: a reload reaches every
// connection, the connection cap counts every loop, ids stay unique.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <iterator>
#include <list>
#include <set>
#include <thread>
#include <vector>

#include "suite_support.hpp"

using namespace std::chrono_literals;

namespace {

std::size_t thread_count(pid_t pid) {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
        ++count;
    }
    return count;
}

}  // namespace

TEST_CASE("two event loops: a reload closes the revoked tunnels on every loop, and ids stay unique") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test c.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7", "c.test:7"}));
    suite::Proxy proxy(files, {"--event-loops", "2", "--policy-poll-ms", "600000"});
    // Six tunnels, three on each loop: four to a.test, two to c.test.
    std::vector<suite::Client> revoked;
    std::vector<suite::Client> kept;
    for (int i = 0; i < 6; ++i) {
        suite::Client client(proxy.port, 2s);
        const bool to_a = i % 3 != 2;
        REQUIRE(suite::connect_through(client, to_a ? "a.test:7" : "c.test:7").status == 200);
        REQUIRE(suite::echo_on(client, "tunnel " + std::to_string(i)));
        (to_a ? revoked : kept).push_back(std::move(client));
    }
    CHECK(thread_count(proxy.process().pid()) >= 2);

    files.write_policy(suite::policy_allowing({"c.test:7"}));
    proxy.process().signal(SIGHUP);
    for (auto& client : revoked) CHECK(client.closed_by_peer());
    for (auto& client : kept) CHECK(suite::echo_on(client, "c.test is still allowed"));

    proxy.process().signal(SIGTERM);
    REQUIRE(proxy.process().wait_exit(5s) == 0);
    std::size_t closed_by_reload = 0;
    std::size_t reported = 0;
    std::set<std::uint64_t> ids;
    std::size_t decisions = 0;
    std::vector<int> loops;
    for (const auto& line : files.log_lines()) {
        const auto event = line.value("event", "");
        if (event == "close" && line.value("ended", "") == "revoked") ++closed_by_reload;
        if (event == "policy" && line.contains("closed_connections"))
            reported += line["closed_connections"].get<std::size_t>();
        if (event == "decision") {
            ++decisions;
            ids.insert(line.value("id", std::uint64_t{0}));
            loops.push_back(line.value("loop", -1));
        }
    }
    // Revoked tunnels on both loops (0, 1, 1, 0), kept ones on both (0, 1).
    CHECK(loops == std::vector<int>{0, 1, 0, 1, 0, 1});
    CHECK(closed_by_reload == revoked.size());
    CHECK(reported == revoked.size());  // one tally over both loops
    CHECK(decisions == 6);
    CHECK(ids.size() == decisions);
}

TEST_CASE("two event loops: the connection cap counts both, and a connection ending on either admits the next") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7"}));
    suite::Proxy proxy(files, {"--event-loops", "2", "--max-connections", "3"});
    // Loops 0, 1, 0: the cap is reached with connections on both loops.
    std::list<suite::Client> open;
    for (int i = 0; i < 3; ++i) {
        suite::Client client(proxy.port, 2s);
        REQUIRE(suite::connect_through(client, "a.test:7").status == 200);
        open.push_back(std::move(client));
    }
    // The fourth waits in the kernel's accept queue: no answer while three are open.
    suite::Client waiting(proxy.port, 400ms);
    waiting.send("CONNECT a.test:7 HTTP/1.1\r\nHost: a.test:7\r\n\r\n");
    CHECK(waiting.read_response().status == 0);
    for (auto& client : open) CHECK(suite::echo_on(client, "still served"));

    // The one on loop 1 ends: the accept loop (on loop 0) is woken and serves the fourth.
    std::this_thread::sleep_for(100ms);  // decision lines are written within 20 ms
    std::vector<int> loops;
    for (const auto& line : files.log_lines()) {
        if (line.value("event", "") == "decision") loops.push_back(line.value("loop", -1));
    }
    REQUIRE(loops == std::vector<int>{0, 1, 0});
    open.erase(std::next(open.begin()));
    waiting.set_timeout(3s);
    CHECK(waiting.read_response().status == 200);
    CHECK(suite::echo_on(waiting, "admitted"));

    // And the cap holds again: a fifth waits.
    suite::Client fifth(proxy.port, 400ms);
    fifth.send("CONNECT a.test:7 HTTP/1.1\r\nHost: a.test:7\r\n\r\n");
    CHECK(fifth.read_response().status == 0);
}
