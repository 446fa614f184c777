// Grants that end on time: `--for DURATION`, the rules in force at a time,
// and the end's place in the policy file.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"
#include "support/error_text.hpp"

using namespace agentctl::policy;

TEST_CASE("policy add --for takes a duration above 0 and at most 366 days") {
    CHECK(parse_grant_duration("90s") == 90);
    CHECK(parse_grant_duration("30m") == 1800);
    CHECK(parse_grant_duration("1h30m") == 5400);
    CHECK(parse_grant_duration("7d") == 7 * 86400);
    CHECK(parse_grant_duration("366d") == 366 * 86400);
    for (const char* bad : {"", "0s", "1", "1w", "h", "-5m", "1h-5m", "1.5h"}) {
        INFO(bad);
        CHECK(agentctl::test::error_of([&] { (void)parse_grant_duration(bad); }) ==
              std::string("invalid --for \"") + bad + "\": a duration such as 90s, 30m, 1h, 7d or 1h30m");
    }
    CHECK(agentctl::test::error_of([] { (void)parse_grant_duration("367d"); }) ==
          "invalid --for \"367d\": at most 366d");
    CHECK(duration_seconds("0s") == 0);  // --since 0s: now
    CHECK_FALSE(duration_seconds("5y"));
}

TEST_CASE("a grant is in force until it ends, and the next end is known") {
    NetworkPolicy policy;
    policy.allow.push_back(parse_allow_entry("kept.test:443", "--allow"));
    policy.allow.push_back(parse_allow_entry("short.test:443", "policy add"));
    policy.allow.push_back(parse_allow_entry("long.test:443", "policy add"));
    policy.allow[1].expires = 1000;
    policy.allow[2].expires = 2000;
    CHECK(in_force_at(policy, 999).allow.size() == 3);
    CHECK(next_expiry(policy, 999) == 1000);
    const auto later = in_force_at(policy, 1000);  // it ends at its second
    REQUIRE(later.allow.size() == 2);
    CHECK(later.allow[1].host == "long.test");
    CHECK(next_expiry(policy, 1000) == 2000);
    CHECK(in_force_at(policy, 2000).allow.size() == 1);
    CHECK(next_expiry(policy, 2000) == 0);
    const auto refused = pre_decide(in_force_at(policy, 1500), "short.test", 443);  // refused before any lookup
    REQUIRE(refused);
    CHECK(refused->reason == Reason::NotAllowlisted);
}

TEST_CASE("a grant's end goes through the policy file, and a malformed one names its field") {
    NetworkPolicy policy;
    policy.allow.push_back(parse_allow_entry("short.test:443", "policy add"));
    auto file = to_policy_file(policy);
    CHECK_FALSE(file["allow"][0].contains("expires"));  // rules for good are written as before
    policy.allow[0].expires = 1'800'000'000;
    file = to_policy_file(policy);
    CHECK(file["allow"][0]["expires"] == 1'800'000'000);
    CHECK(from_policy_file(file).allow[0].expires == 1'800'000'000);
    file["allow"][0]["expires"] = "tomorrow";
    CHECK_THROWS_WITH(from_policy_file(file),
                      "malformed policy file: field allow[0].expires: must be a time in seconds since the epoch");
}
