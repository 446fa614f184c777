// `logs --network --since/--tail/--summary`: parsing a time or duration,
// narrowing the merged lines, folding them into one row per destination.
#include <catch2/catch.hpp>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "egress_proxy/log_query.hpp"
#include "egress_proxy/log_summary.hpp"

using agentctl::egress_proxy::parse_since;
using std::chrono::system_clock;

namespace {

// 2026-01-02T03:04:05.678Z
system_clock::time_point fixed_now() { return system_clock::from_time_t(1767323045) + std::chrono::milliseconds(678); }

}  // namespace

TEST_CASE("logs --network --since takes a duration before now") {
    CHECK(parse_since("30s", fixed_now()) == "2026-01-02T03:03:35.678Z");
    CHECK(parse_since("15m", fixed_now()) == "2026-01-02T02:49:05.678Z");
    CHECK(parse_since("2h", fixed_now()) == "2026-01-02T01:04:05.678Z");
    CHECK(parse_since("1d", fixed_now()) == "2026-01-01T03:04:05.678Z");
    CHECK(parse_since("1h30m", fixed_now()) == "2026-01-02T01:34:05.678Z");
    CHECK(parse_since("0s", fixed_now()) == "2026-01-02T03:04:05.678Z");
}

TEST_CASE("logs --network --since takes an RFC 3339 time in any zone, or a date") {
    CHECK(parse_since("2026-01-02T03:04:05Z", fixed_now()) == "2026-01-02T03:04:05.000Z");
    CHECK(parse_since("2026-01-02T03:04:05.25Z", fixed_now()) == "2026-01-02T03:04:05.250Z");
    CHECK(parse_since("2026-01-02T04:04:05+01:00", fixed_now()) == "2026-01-02T03:04:05.000Z");
    CHECK(parse_since("2026-01-01T22:34:05-04:30", fixed_now()) == "2026-01-02T03:04:05.000Z");
    CHECK(parse_since("2026-01-02 03:04:05Z", fixed_now()) == "2026-01-02T03:04:05.000Z");
    CHECK(parse_since("2026-01-02", fixed_now()) == "2026-01-02T00:00:00.000Z");
}

TEST_CASE("logs --network --since refuses what is neither, naming the value and the accepted forms") {
    for (const char* bad : {"", "yesterday", "15", "15x", "m", "1h30", "-5m", "2026-01-02T03:04:05", "2026-02-31",
                            "2026-13-01", "2026-01-02T25:00:00Z", "2026-01-02T03:04:05+1"}) {
        INFO(bad);
        try {
            (void)parse_since(bad, fixed_now());
            FAIL("accepted");
        } catch (const agentctl::Error& e) {
            CHECK(std::string(e.what()) ==
                  std::string("invalid --since \"") + bad + "\": it is neither a duration nor a time");
            CHECK(std::string(e.hint()).find("1h30m") != std::string::npos);
        }
    }
}

TEST_CASE("logs --network --since and --tail narrow the merged lines; a line without a time goes with the one before") {
    std::vector<std::string> lines{
        R"({"time":"2026-01-02T03:00:00.000Z","event":"decision"})",
        R"({"time":"2026-01-02T03:05:00.000Z","event":"decision"})",
        R"(not json, no time)",
        R"({"time":"2026-01-02T03:10:00.000Z","event":"close"})",
    };
    auto since = lines;
    agentctl::egress_proxy::narrow_lines(since, "2026-01-02T03:05:00.000Z", std::nullopt);
    CHECK(since == std::vector<std::string>(lines.begin() + 1, lines.end()));
    auto tail = lines;
    agentctl::egress_proxy::narrow_lines(tail, "", 2);
    CHECK(tail == std::vector<std::string>(lines.begin() + 2, lines.end()));
    auto both = lines;
    agentctl::egress_proxy::narrow_lines(both, "2026-01-02T03:09:00.000Z", 5);
    CHECK(both == std::vector<std::string>{lines.back()});
    auto none = lines;
    agentctl::egress_proxy::narrow_lines(none, "", 0);
    CHECK(none.empty());
}

TEST_CASE("the summary folds close records and refusals into one row per destination") {
    const std::vector<std::string> lines{
        R"({"time":"2026-01-02T03:00:01.000Z","event":"decision","host":"api.test","port":443,"decision":"allow"})",
        R"({"time":"2026-01-02T03:00:09.000Z","event":"close","start":"2026-01-02T03:00:01.000Z","host":"api.test","port":443,"bytes_up":1000,"bytes_down":50000,"ended":"closed"})",
        R"({"time":"2026-01-02T03:01:00.000Z","event":"close","start":"2026-01-02T03:00:30.000Z","host":"api.test","port":443,"bytes_up":2000,"bytes_down":1,"ended":"budget"})",
        R"({"time":"2026-01-02T03:02:00.000Z","event":"decision","host":"evil.test","port":443,"decision":"deny","reason":"not-allowlisted"})",
        R"({"time":"2026-01-02T03:03:00.000Z","event":"decision","host":"evil.test","port":443,"decision":"deny","reason":"not-allowlisted"})",
        R"({"time":"2026-01-02T03:04:00.000Z","event":"decision","host":"api.test","port":443,"decision":"error","reason":"budget-exhausted"})",
        R"({"time":"2026-01-02T03:05:00.000Z","event":"refusals-suppressed","suppressed":7,"by_reason":{"not-allowlisted":7},"from":"2026-01-02T03:04:30.000Z","to":"2026-01-02T03:04:31.000Z"})",
        R"(garbage)",
    };
    const auto rows = agentctl::egress_proxy::summarise_log(lines);
    REQUIRE(rows.size() == 3);
    const auto& api = rows[0];
    CHECK(api.host == "api.test");
    CHECK(api.port == 443);
    CHECK(api.connections == 2);
    CHECK(api.bytes_up == 3000);
    CHECK(api.bytes_down == 50001);
    CHECK(api.first_seen == "2026-01-02T03:00:01.000Z");
    CHECK(api.last_seen == "2026-01-02T03:04:00.000Z");
    CHECK(api.endings == std::map<std::string, std::uint64_t>{{"budget", 1}, {"closed", 1}});
    CHECK(api.refusals == 1);
    CHECK(rows[1].host.empty());  // the suppressed refusals: no destination
    CHECK(rows[1].refusals == 7);
    CHECK(rows[2].host == "evil.test");
    CHECK(rows[2].connections == 0);
    CHECK(rows[2].refusals == 2);
    CHECK(rows[2].refusal_reasons == std::map<std::string, std::uint64_t>{{"not-allowlisted", 2}});

    std::ostringstream table;
    agentctl::egress_proxy::print_summary(rows, false, table);
    const auto text = table.str();
    CHECK(text.starts_with("DESTINATION"));
    CHECK(text.find("api.test:443                           2   2.93 KiB   48.8 KiB  2026-01-02 03:00:01  "
                    "2026-01-02 03:04:00  1 (budget-exhausted 1)") != std::string::npos);
    CHECK(text.find("evil.test:443                          0        0 B        0 B") != std::string::npos);

    std::ostringstream json;
    agentctl::egress_proxy::print_summary(rows, true, json);
    std::istringstream in(json.str());
    std::string first;
    std::getline(in, first);
    const auto row = nlohmann::json::parse(first);
    CHECK(row["destination"] == "api.test:443");
    CHECK(row["port"].is_number_unsigned());
    CHECK(row["bytes_up"] == 3000);
    CHECK(row["connections"] == 2);
    CHECK(row["refusal_reasons"]["budget-exhausted"] == 1);
    CHECK(row["ended"]["budget"] == 1);
}
