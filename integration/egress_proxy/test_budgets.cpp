// Upload budgets: what a sandbox may send to one destination. Past it, the
// tunnel that tried ends at once, so do the others there, and new requests
// get a 429 naming the budget and the command that raises it; the counters
// survive a restart of the proxy.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "core/files.hpp"
#include "suite_support.hpp"

using namespace std::chrono_literals;

namespace {

agentctl::policy::NetworkPolicy with_budget(agentctl::policy::NetworkPolicy policy, const std::string& entry) {
    policy.budgets.push_back(agentctl::policy::parse_budget_entry(entry));
    return policy;
}

}  // namespace

TEST_CASE("a budget cuts the upload tunnel within 100 ms of crossing, and the next request gets 429") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 echo.test other.test\n");
    constexpr std::size_t k_budget = 256 * 1024;
    files.write_policy(with_budget(suite::policy_allowing({"echo.test:7", "other.test:7"}), "echo.test:7=256KiB"));
    suite::Proxy proxy(files, {"--sandbox", "budget-test"});

    suite::Client idle(proxy.port);  // another tunnel to the same destination, quiet when the budget runs out
    REQUIRE(suite::connect_through(idle, "echo.test:7").status == 200);
    REQUIRE(suite::echo_on(idle, "hi"));
    suite::Client upload(proxy.port);
    REQUIRE(suite::connect_through(upload, "echo.test:7").status == 200);
    // Up to the budget exactly: every byte reaches the origin and comes back.
    const std::string payload(k_budget - 2, 'b');
    upload.send(payload);
    REQUIRE(upload.read_exact(payload.size()) == payload);

    const auto crossed = std::chrono::steady_clock::now();
    upload.send("x");  // one byte past the budget
    REQUIRE(upload.closed_by_peer());
    const auto cut = std::chrono::steady_clock::now() - crossed;
    CHECK(idle.closed_by_peer());
    const auto both = std::chrono::steady_clock::now() - crossed;
    using Ms = std::chrono::duration<double, std::milli>;
    WARN("the tunnel that crossed ended " << Ms(cut).count() << " ms after the byte past the budget; the quiet one by "
                                          << Ms(both).count() << " ms");
    CHECK(cut < 100ms);
    CHECK(both < 100ms);

    suite::Client next(proxy.port);
    const auto refused = suite::connect_through(next, "echo.test:7");
    CHECK(refused.status == 429);
    CHECK(refused.header("X-Agentctl-Reason") == "upload-budget-spent");
    CHECK(refused.body.find("its upload budget of 262144 bytes") != std::string::npos);
    CHECK(refused.body.find("agentctl policy budget budget-test echo.test:7=SIZE") != std::string::npos);
    suite::Client elsewhere(proxy.port);  // the budget is this destination's only
    REQUIRE(suite::connect_through(elsewhere, "other.test:7").status == 200);
    CHECK(suite::echo_on(elsewhere, "other destinations are not counted"));

    const auto records = files.close_records("echo.test", 2);
    REQUIRE(records.size() == 2);
    std::uint64_t sent = 0;
    for (const auto& record : records) {
        CHECK(record.value("ended", "") == "budget");
        sent += record.value("bytes_up", std::uint64_t{0});
    }
    CHECK(sent == k_budget);  // never a byte past it
    bool logged = false;
    for (const auto& line : files.log_lines()) {
        logged = logged || (line.value("reason", "") == "upload-budget-spent" && line.value("status", 0) == 429);
    }
    CHECK(logged);
}

TEST_CASE("upload budgets survive a restart of the proxy") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 drain.test\n");
    files.write_policy(with_budget(suite::policy_allowing({"drain.test:10"}), "drain.test:10=100000"));
    const std::string chunk(60'000, 'd');
    {
        suite::Proxy proxy(files);
        suite::Client tunnel(proxy.port);
        REQUIRE(suite::connect_through(tunnel, "drain.test:10").status == 200);
        tunnel.send(chunk);
        tunnel.shutdown_send();
        CHECK(tunnel.read_to_end() == "received 60000 bytes\n");
        proxy.process().signal(SIGTERM);
        REQUIRE(proxy.process().wait_exit(5s) == 0);
    }
    const auto state = nlohmann::json::parse(agentctl::core::read_file(files.log.string() + ".budgets"));
    CHECK(state["sent"]["drain.test:10"] == 60000);

    suite::Proxy restarted(files);
    {
        suite::Client tunnel(restarted.port);
        REQUIRE(suite::connect_through(tunnel, "drain.test:10").status == 200);
        tunnel.send(chunk);  // 40,000 bytes of it fit the budget left
        CHECK(tunnel.closed_by_peer());
    }
    auto records = files.close_records("drain.test", 2);
    REQUIRE(records.size() == 2);
    CHECK(records.back().value("ended", "") == "budget");
    CHECK(records.back().value("bytes_up", 0) == 40000);
    suite::Client next(restarted.port);
    CHECK(suite::connect_through(next, "drain.test:10").status == 429);
}
