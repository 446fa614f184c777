// Grants that end on time (`policy add NAME HOST:PORT --for DURATION`): the
// end is in the policy file, the proxy reloads when it passes, leaves the
// grant out and ends the connections it allowed; the next request is refused.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "suite_support.hpp"

using namespace std::chrono_literals;

namespace {

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

TEST_CASE("an expiring grant ends its open tunnel when it passes, and the next request is refused") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 grant.test kept.test\n");
    auto policy = suite::policy_allowing({"grant.test:7", "kept.test:7"});
    const auto ends = unix_now() + 2;
    policy.allow[0].expires = ends;
    files.write_policy(policy);
    suite::Proxy proxy(files);

    suite::Client granted(proxy.port, 10s);
    REQUIRE(suite::connect_through(granted, "grant.test:7").status == 200);
    REQUIRE(suite::echo_on(granted, "while the grant lasts"));
    suite::Client kept(proxy.port);
    REQUIRE(suite::connect_through(kept, "kept.test:7").status == 200);

    // The proxy ends the tunnel when the grant passes: wait for that close, no sooner.
    REQUIRE(granted.closed_by_peer());
    const auto closed_at = std::chrono::system_clock::now();
    CHECK(closed_at >= std::chrono::system_clock::time_point(std::chrono::seconds(ends)));
    CHECK(closed_at < std::chrono::system_clock::time_point(std::chrono::seconds(ends)) + 1s);

    suite::Client next(proxy.port);
    const auto refused = suite::connect_through(next, "grant.test:7");
    CHECK(refused.status == 403);
    CHECK(refused.header("X-Agentctl-Reason") == "not-allowlisted");
    CHECK(suite::echo_on(kept, "a grant for good stays"));

    const auto records = files.close_records("grant.test");
    REQUIRE(records.size() == 1);
    CHECK(records[0].value("ended", "") == "revoked");
    bool reloaded = false;
    for (const auto& line : files.log_lines()) {
        reloaded = reloaded || (line.value("event", "") == "policy" && line.value("trigger", "") == "grant expired" &&
                                line.value("closed_connections", 0) == 1);
    }
    CHECK(reloaded);
}

TEST_CASE("a grant that ended while the proxy was down is not in force when it starts") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 grant.test\n");
    auto policy = suite::policy_allowing({"grant.test:7"});
    policy.allow[0].expires = unix_now() - 1;
    files.write_policy(policy);
    suite::Proxy proxy(files);
    suite::Client client(proxy.port);
    const auto refused = suite::connect_through(client, "grant.test:7");
    CHECK(refused.status == 403);
    CHECK(refused.header("X-Agentctl-Reason") == "not-allowlisted");
}
