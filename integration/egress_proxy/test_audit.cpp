// One record per connection: the `close` line names the sandbox, when the
// connection started and ended, the name asked for, the address dialled, the
// rule and its origin, the bytes each way (as the destination counted them)
// and how it ended.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <map>
#include <sstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "egress_proxy/egress_proxy.hpp"
#include "suite_support.hpp"

using namespace std::chrono_literals;

namespace {

// Sends `total` bytes up a tunnel to the drain origin, half-closes, and
// returns what the origin says it received.
std::uint64_t upload_to_drain(suite::Client& tunnel, std::size_t total) {
    const std::string chunk(64 * 1024, 'u');
    for (std::size_t sent = 0; sent < total; sent += chunk.size()) {
        tunnel.send(chunk.substr(0, std::min(chunk.size(), total - sent)));
    }
    tunnel.shutdown_send();
    const std::string answer = tunnel.read_to_end();  // `received N bytes\n`
    REQUIRE(answer.starts_with("received "));
    return std::stoull(answer.substr(9));
}

}  // namespace

TEST_CASE("a connection's close record names its sandbox, times, rule, address, bytes and ending") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 drain.test\n");
    files.write_policy(suite::policy_allowing({"drain.test:10"}));
    suite::Proxy proxy(files, {"--sandbox", "audit-record"});
    constexpr std::size_t k_upload = 3 * 1024 * 1024 + 123;
    std::uint64_t origin_received = 0;
    {
        suite::Client tunnel(proxy.port);
        REQUIRE(suite::connect_through(tunnel, "drain.test:10").status == 200);
        origin_received = upload_to_drain(tunnel, k_upload);
    }
    REQUIRE(origin_received == k_upload);
    auto records = files.close_records("drain.test");
    REQUIRE(records.size() == 1);
    const auto& record = records.front();
    const auto up = record.value("bytes_up", std::uint64_t{0});
    WARN("origin counted " << origin_received << " B up; the record says " << up << " B up, "
                           << record.value("bytes_down", 0) << " B down");
    CHECK(static_cast<double>(up) >= 0.99 * static_cast<double>(origin_received));
    CHECK(static_cast<double>(up) <= 1.01 * static_cast<double>(origin_received));
    const std::string answer = "received " + std::to_string(origin_received) + " bytes\n";
    CHECK(record.value("bytes_down", std::uint64_t{0}) == answer.size());
    CHECK(record.value("sandbox", "") == "audit-record");
    CHECK(record.value("port", 0) == 10);
    CHECK(record.value("address", "") == "192.0.3.2");
    CHECK(record.value("rule", "") == "drain.test:10");
    CHECK(record.value("origin", "") == "--allow");
    CHECK(record.value("ended", "") == "closed");
    const auto start = record.value("start", "");
    const auto end = record.value("time", "");
    REQUIRE(start.size() == 24);  // RFC 3339 with milliseconds, UTC
    CHECK(start <= end);
    CHECK(record.contains("duration_ms"));
}

TEST_CASE("a close record says when the idle timeout or the proxy's stop ended the connection") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 idle.test stop.test\n");
    files.write_policy(suite::policy_allowing({"idle.test:7", "stop.test:7"}));
    suite::Proxy proxy(files, {"--idle-timeout-ms", "300"});
    suite::Client idle(proxy.port, 3s);
    REQUIRE(suite::connect_through(idle, "idle.test:7").status == 200);
    CHECK(idle.closed_by_peer());  // nothing moves: the idle timeout ends it
    auto idle_records = files.close_records("idle.test");
    REQUIRE(idle_records.size() == 1);
    CHECK(idle_records.front().value("ended", "") == "idle-timeout");

    suite::Client busy(proxy.port, 3s);
    REQUIRE(suite::connect_through(busy, "stop.test:7").status == 200);
    REQUIRE(suite::echo_on(busy, "still here"));
    proxy.process().signal(SIGTERM);
    CHECK(proxy.process().wait_exit(5s) == 0);
    auto stop_records = files.close_records("stop.test");
    REQUIRE(stop_records.size() == 1);
    CHECK(stop_records.front().value("ended", "") == "proxy-stop");
    CHECK(stop_records.front().value("bytes_up", 0) == 10);
}

TEST_CASE("logs --network --summary adds up each destination's connections, bytes and refusals") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 drain.test echo.test\n");
    files.write_policy(suite::policy_allowing({"drain.test:10", "echo.test:7"}));
    suite::Proxy proxy(files);
    std::uint64_t uploaded = 0;
    std::uint64_t answers = 0;
    for (std::size_t size : {100'000u, 250'000u, 1'000'000u}) {
        suite::Client tunnel(proxy.port);
        REQUIRE(suite::connect_through(tunnel, "drain.test:10").status == 200);
        uploaded += upload_to_drain(tunnel, size);
        answers += ("received " + std::to_string(size) + " bytes\n").size();
    }
    for (int i = 0; i < 2; ++i) {
        suite::Client tunnel(proxy.port);
        REQUIRE(suite::connect_through(tunnel, "echo.test:7").status == 200);
        REQUIRE(suite::echo_on(tunnel, "twelve bytes"));
    }
    auto refuse = [&] {
        suite::Client refused(proxy.port);
        REQUIRE(suite::connect_through(refused, "elsewhere.test:443").status != 200);
    };
    refuse();
    refuse();
    REQUIRE(files.close_records("drain.test", 3).size() == 3);
    REQUIRE(files.close_records("echo.test", 2).size() == 2);
    refuse();  // after every close record: the log's last line
    for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
        std::size_t refusals = 0;
        for (const auto& line : files.log_lines()) refusals += line.value("host", "") == "elsewhere.test" ? 1 : 0;
        if (refusals == 3) break;
    }

    agentctl::LogRequest request;
    request.summary = true;
    request.json = true;
    std::ostringstream json;
    agentctl::egress_proxy::print_network_log(files.log.string(), request, json);
    std::map<std::string, nlohmann::json> rows;
    std::istringstream in(json.str());
    for (std::string line; std::getline(in, line);) {
        auto row = nlohmann::json::parse(line);
        rows[row["destination"].get<std::string>()] = row;
    }
    REQUIRE(rows.size() == 3);
    const auto& drain = rows["drain.test:10"];
    CHECK(drain["connections"] == 3);
    CHECK(drain["bytes_up"] == uploaded);
    CHECK(drain["bytes_down"] == answers);
    CHECK(drain["ended"]["closed"] == 3);
    CHECK(drain["refusals"] == 0);
    CHECK(drain["first_seen"] <= drain["last_seen"]);
    const auto& echo = rows["echo.test:7"];
    CHECK(echo["connections"] == 2);
    CHECK(echo["bytes_up"] == 24);
    CHECK(echo["bytes_down"] == 24);
    const auto& refused = rows["elsewhere.test:443"];
    CHECK(refused["connections"] == 0);
    CHECK(refused["refusals"] == 3);
    CHECK(refused["refusal_reasons"].size() == 1);
    CHECK(refused["refusal_reasons"].begin().value() == 3);

    request.json = false;
    std::ostringstream table;
    agentctl::egress_proxy::print_network_log(files.log.string(), request, table);
    WARN("the summary table:\n" << table.str());
    std::istringstream rows_text(table.str());
    std::string header, first;
    std::getline(rows_text, header);
    std::getline(rows_text, first);
    CHECK(header.starts_with("DESTINATION"));
    CHECK(first.starts_with("drain.test:10 "));  // the most bytes first

    // --tail 1 keeps the last line only: the summary of it holds one refusal, no connection.
    request.tail = 1;
    request.json = true;
    std::ostringstream last;
    agentctl::egress_proxy::print_network_log(files.log.string(), request, last);
    auto only = nlohmann::json::parse(last.str());
    CHECK(only["destination"] == "elsewhere.test:443");
    CHECK(only["refusals"] == 1);
}

TEST_CASE("a proxy without connection records relays and refuses and counts budgets as one with them") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    // The same traffic through a proxy with its records (the default) and
    // through the benches' proxy without them (egress_proxy_runner --no-records).
    struct Seen {
        std::size_t closes = 0, allowed = 0, denied = 0, over_budget = 0;
        bool says_off = false;
    };
    const auto run = [](const std::vector<std::string>& flags) {
        suite::ProxyFiles files;
        files.write_resolve("192.0.3.2 drain.test echo.test denied.test\n");
        auto policy = suite::policy_allowing({"drain.test:10", "echo.test:7"});
        policy.budgets.push_back(agentctl::policy::parse_budget_entry("echo.test:7=1KiB"));
        files.write_policy(policy);
        suite::Proxy proxy(files, flags);
        {
            suite::Client tunnel(proxy.port);
            REQUIRE(suite::connect_through(tunnel, "drain.test:10").status == 200);
            CHECK(upload_to_drain(tunnel, 200'000) == 200'000);
        }
        {
            suite::Client tunnel(proxy.port);
            REQUIRE(suite::connect_through(tunnel, "echo.test:7").status == 200);
            REQUIRE(suite::echo_on(tunnel, "hello"));
            tunnel.send(std::string(2000, 'b'));  // past the budget: the tunnel ends
            CHECK(tunnel.closed_by_peer());
        }
        suite::Client over(proxy.port);
        CHECK(suite::connect_through(over, "echo.test:7").status == 429);
        suite::Client denied(proxy.port);
        CHECK(suite::connect_through(denied, "denied.test:7").status == 403);
        proxy.process().signal(SIGTERM);  // writes every queued line
        REQUIRE(proxy.process().wait_exit(5s) == 0);
        Seen seen;
        for (const auto& line : files.log_lines()) {
            const auto event = line.value("event", "");
            seen.closes += event == "close" ? 1 : 0;
            seen.allowed += event == "decision" && line.value("decision", "") == "allow" ? 1 : 0;
            seen.denied += line.value("host", "") == "denied.test" && line.value("status", 0) == 403 ? 1 : 0;
            seen.over_budget += line.value("reason", "") == "upload-budget-spent" ? 1 : 0;
            seen.says_off = seen.says_off || (event == "start" && line.value("connection_records", true) == false);
        }
        return seen;
    };
    const Seen on = run({});
    CHECK(on.closes == 2);
    CHECK(on.allowed == 2);
    CHECK(on.denied == 1);
    CHECK(on.over_budget == 1);
    CHECK_FALSE(on.says_off);
    const Seen off = run({"--no-records"});
    CHECK(off.closes == 0);
    CHECK(off.allowed == 0);
    CHECK(off.denied == 1);  // refusals are still written
    CHECK(off.over_budget == 1);
    CHECK(off.says_off);  // and its start line says it keeps no records
}
