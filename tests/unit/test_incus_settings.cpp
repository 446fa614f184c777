// The Incus provider's configuration keys: one table of names, defaults and
// validators.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "agentctl/error.hpp"
#include "provider/incus/settings.hpp"
#include "provider/incus/subnet_pool.hpp"

using namespace agentctl::provider::incus;

namespace {
const agentctl::ConfigKey& key(std::string_view name) {
    const auto all = settings();
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& k) { return k.name == name; });
    REQUIRE(it != all.end());
    return *it;
}
}  // namespace

TEST_CASE("every Incus setting is named incus.* and its default passes its own validator", "[settings]") {
    for (const auto& k : settings()) {
        INFO(k.name);
        CHECK(k.name.starts_with("incus."));
        if (!k.default_value.empty()) CHECK(k.validate(k.default_value).empty());
    }
    // The default pool is one the provider can carve subnets from.
    const auto pool = parse_ipv4_net(key(config_key::k_subnet_pool).default_value);
    REQUIRE(pool);
    CHECK(pick_subnet(*pool, std::stoi(std::string(key(config_key::k_subnet_prefix).default_value)), {}).to_string() ==
          "10.213.0.0/28");
}
