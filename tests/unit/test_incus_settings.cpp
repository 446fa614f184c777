// The Incus provider's configuration keys: one table of names, defaults and
// validators, and one rule for incus.imageRemote shared by `config set` and
// `image pull`.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/lifecycle/settings.hpp"
#include "provider/incus/network/subnet_pool.hpp"

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

TEST_CASE("incus.imageRemote: config set and image pull accept the same values", "[settings]") {
    const auto& remote = key(config_key::k_image_remote);
    for (const char* good : {"images", "https://images.linuxcontainers.org", "https://images.example.org/streams"}) {
        INFO(good);
        CHECK(remote.validate(good).empty());
        CHECK_NOTHROW(image_server_url(good));
    }
    CHECK(image_server_url("images") == "https://images.linuxcontainers.org");
    CHECK(image_server_url("https://images.example.org") == "https://images.example.org");
    for (const char* bad : {"ubuntu", "images.example.org", "https://", "://host", "https://a b"}) {
        INFO(bad);
        CHECK_FALSE(remote.validate(bad).empty());
        CHECK_THROWS_AS(image_server_url(bad), agentctl::Error);
    }
    CHECK_THROWS_WITH(image_server_url("ubuntu"),
                      "setting incus.imageRemote: must be `images` or the URL of a simplestreams server, such as "
                      "https://images.linuxcontainers.org (got 'ubuntu')");
}

TEST_CASE("incus.pool.size: a whole number from 0 to the most the pool takes", "[settings]") {
    const auto& size = key(config_key::k_pool_size);
    CHECK(size.default_value == "0");
    for (const char* good : {"0", "1", "32"}) {
        INFO(good);
        CHECK(size.validate(good).empty());
    }
    for (const char* bad : {"33", "-1", "two", "", "1.5", "4 "}) {
        INFO(bad);
        CHECK(size.validate(bad) == fmt::format("must be a whole number from 0 to 32 (got '{}')", bad));
    }
}
