#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "egress_proxy/resolve_file.hpp"

using agentctl::egress_proxy::ResolveMap;

namespace {

std::string text_of(const agentctl::policy::IpAddress& a) {
    char buffer[64];
    if (!a.v6) {
        std::snprintf(buffer, sizeof buffer, "%u.%u.%u.%u", a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]);
        return buffer;
    }
    return "v6";
}

}  // namespace

TEST_CASE("resolve file: /etc/hosts format, several lines for one name keep order") {
    auto map = ResolveMap::parse(
        "# test hosts\n"
        "198.51.100.2   allowed.test  Other.test\n"
        "\n"
        "198.51.100.3\tallowed.test   # second address\n"
        "2001:db8::5 six.test\n"
        "198.51.100.2 allowed.test\n",
        "hosts.txt");
    auto allowed = map.lookup("ALLOWED.test.");
    REQUIRE(allowed);
    REQUIRE(allowed->size() == 2);
    CHECK(text_of((*allowed)[0]) == "198.51.100.2");
    CHECK(text_of((*allowed)[1]) == "198.51.100.3");
    REQUIRE(map.lookup("other.test"));
    auto six = map.lookup("six.test");
    REQUIRE(six);
    CHECK((*six)[0].v6);
    CHECK_FALSE(map.lookup("missing.test"));
    CHECK(map.size() == 3);
}

TEST_CASE("resolve file: errors name file, line, column and field") {
    try {
        (void)ResolveMap::parse("198.51.100.2 ok.test\n  127.1 short.test\n", "hosts.txt");
        FAIL("no error");
    } catch (const agentctl::Error& e) {
        CHECK(std::string(e.what()).find("hosts.txt:2:3") != std::string::npos);
        CHECK(std::string(e.what()).find("address") != std::string::npos);
        CHECK(std::string(e.what()).find("127.1") != std::string::npos);
    }
    CHECK_THROWS_AS(ResolveMap::parse("198.51.100.2\n", "h"), agentctl::Error);
    CHECK_THROWS_AS(ResolveMap::parse("198.51.100.2 bad/name\n", "h"), agentctl::Error);
    CHECK_THROWS_AS(ResolveMap::load("/nonexistent/hosts"), agentctl::Error);
}
