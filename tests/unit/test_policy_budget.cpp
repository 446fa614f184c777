// Upload budgets: `HOST:PORT=SIZE` and their place in the policy file.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"

using agentctl::policy::parse_budget_entry;

TEST_CASE("a budget entry is HOST:PORT=SIZE") {
    auto budget = parse_budget_entry("API.GitHub.com:443=50MiB");
    CHECK(budget.host == "api.github.com");
    CHECK(budget.port == 443);
    CHECK(budget.bytes == 50ULL * 1024 * 1024);
    CHECK(parse_budget_entry("api.github.com:443=1GB").bytes == 1'000'000'000ULL);
    CHECK(agentctl::policy::destination_text("2606:4700::1111", 443) == "[2606:4700::1111]:443");
    CHECK(parse_budget_entry("api.github.com:443=none").bytes == 0);  // lifts it
}

TEST_CASE("an address cannot have a budget, since the firewall admits it without the proxy; none still lifts one") {
    for (const char* entry : {"10.0.0.5:22=1000", "[2606:4700::1111]:443=1GB", "93.184.216.34:443=5MiB"}) {
        INFO(entry);
        try {
            (void)parse_budget_entry(entry);
            FAIL("accepted");
        } catch (const agentctl::Error& e) {
            CHECK(std::string(e.what()).find("is an address, which the sandbox's firewall admits without the "
                                             "egress proxy, so no budget could count it") != std::string::npos);
            CHECK(e.hint().starts_with("allow the destination by name and give the name a budget"));
        }
    }
    const auto lifted = parse_budget_entry("10.0.0.5:22=none");
    CHECK(lifted.host == "10.0.0.5");
    CHECK(lifted.bytes == 0);
}

TEST_CASE("a malformed budget entry names itself and the form to write") {
    for (const char* bad :
         {"api.github.com:443", "api.github.com=5MiB", "api.github.com:443=0", "api.github.com:443=5Q",
          "*.github.com:443=5MiB", "api.github.com:80,443=5MiB", ":443=5MiB", "api.github.com:443="}) {
        INFO(bad);
        try {
            (void)parse_budget_entry(bad);
            FAIL("accepted");
        } catch (const agentctl::Error& e) {
            CHECK(std::string(e.what()).starts_with(std::string("invalid budget \"") + bad + "\": "));
            CHECK(e.hint() == "write HOST:PORT=SIZE, e.g. api.github.com:443=50MiB");
        }
    }
}

TEST_CASE("budgets go through the policy file, and a malformed one names its field") {
    agentctl::policy::NetworkPolicy policy;
    CHECK_FALSE(agentctl::policy::to_policy_file(policy).contains("budgets"));  // files without budgets unchanged
    policy.budgets.push_back(parse_budget_entry("api.test:443=2KiB"));
    auto file = agentctl::policy::to_policy_file(policy);
    CHECK(file["budgets"] == nlohmann::json::parse(R"([{"host":"api.test","port":443,"bytes":2048}])"));
    auto back = agentctl::policy::from_policy_file(file);
    REQUIRE(back.budgets.size() == 1);
    CHECK(back.budgets[0].host == "api.test");
    CHECK(back.budgets[0].port == 443);
    CHECK(back.budgets[0].bytes == 2048);

    file["budgets"][0]["bytes"] = 0;
    CHECK_THROWS_WITH(agentctl::policy::from_policy_file(file),
                      "malformed policy file: field budgets[0].bytes: must be a whole number above 0");
    file["budgets"][0]["bytes"] = 5;
    file["budgets"][0]["port"] = 70000;
    CHECK_THROWS_WITH(agentctl::policy::from_policy_file(file),
                      "malformed policy file: field budgets[0].port: must be in 1-65535");
}
