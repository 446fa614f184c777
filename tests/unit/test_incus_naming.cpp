#include <catch2/catch.hpp>

#include <set>

#include "agentctl/error.hpp"
#include "provider/incus/lifecycle/naming.hpp"

using namespace agentctl::provider::incus;

TEST_CASE("bridge names fit the 15-character interface limit and are stable", "[naming]") {
    std::set<std::string> seen;
    for (int i = 0; i < 2000; ++i) {
        auto name = bridge_name("sandbox-" + std::to_string(i));
        CHECK(name.size() == 15);
        CHECK(name.rfind("agc-", 0) == 0);
        seen.insert(name);
    }
    CHECK(seen.size() == 2000);
    CHECK(bridge_name("tbox") == bridge_name("tbox"));
    CHECK(acl_name("tbox") == "agentctl-tbox");
}

TEST_CASE("sandbox names Incus would refuse are refused first", "[naming]") {
    CHECK_NOTHROW(check_sandbox_name("my-agent-2"));
    CHECK_THROWS_WITH(check_sandbox_name(""), Catch::Contains("empty"));
    CHECK_THROWS_WITH(check_sandbox_name("2fast"), Catch::Contains("start with"));
    CHECK_THROWS_WITH(check_sandbox_name("a_b"), Catch::Contains("'_' is not allowed"));
    CHECK_THROWS_WITH(check_sandbox_name("ends-"), Catch::Contains("end with"));
    CHECK_THROWS_AS(check_sandbox_name(std::string(55, 'a')), agentctl::Error);
}
