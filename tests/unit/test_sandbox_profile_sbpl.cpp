// The generated Seatbelt profiles, compared with golden files
// (tests/golden/sbpl/). Regenerate a golden file only after reading the diff:
// AGENTCTL_UPDATE_GOLDEN=1 ./unit_sandbox_profile rewrites them.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "agentctl/error.hpp"
#include "sandbox_profile/sbpl_profile.hpp"
#include "support/build_paths.hpp"

using agentctl::sandbox_profile::generate_sbpl;
using agentctl::sandbox_profile::SbplOptions;

namespace {

std::string golden_path(const std::string& name) {
    return std::string(agentctl::test::source_dir()) + "/tests/golden/sbpl/" + name;
}

void check_golden(const std::string& name, const std::string& actual) {
    if (const char* update = std::getenv("AGENTCTL_UPDATE_GOLDEN"); update && std::string(update) == "1") {
        std::ofstream(golden_path(name)) << actual;
    }
    std::ifstream in(golden_path(name));
    REQUIRE(in.good());
    std::stringstream expected;
    expected << in.rdbuf();
    CHECK(actual == expected.str());
}

SbplOptions options() {
    SbplOptions o;
    o.instance = "tbox";
    o.ssh_port = 50022;
    o.proxy_port = 51234;
    o.lima_home = "/Users/dev/.lima";
    return o;
}

}  // namespace

TEST_CASE("the default profile denies every outbound connection but SSH, proxy and Lima's sockets",
          "[sandbox_profile]") {
    auto profile = generate_sbpl(options());
    check_golden("default.sb", profile);
    // Seatbelt only takes localhost or * as the host of `remote ip`: never a wildcard host here.
    CHECK(profile.find("remote ip \"*") == std::string::npos);
    CHECK(profile.find("(deny network-outbound)\n") < profile.find("(allow network-outbound"));
}

TEST_CASE("network.dns.disabled also denies the system resolver's socket", "[sandbox_profile]") {
    auto o = options();
    o.host_resolver = false;
    auto profile = generate_sbpl(o);
    check_golden("dns-disabled.sb", profile);
    CHECK(profile.find(
              "(allow network-outbound (remote unix-socket (path-literal \"/private/var/run/mDNSResponder\")))") ==
          std::string::npos);
    CHECK(profile.find(
              "(deny network-outbound (remote unix-socket (path-literal \"/private/var/run/mDNSResponder\")))") !=
          std::string::npos);
}

TEST_CASE("a trailing slash on Lima's home is dropped", "[sandbox_profile]") {
    auto o = options();
    o.lima_home = "/Users/dev/.lima/";
    CHECK(generate_sbpl(o) == generate_sbpl(options()));
}

TEST_CASE("profiles that cannot be written safely are refused", "[sandbox_profile]") {
    auto o = options();
    o.ssh_port = 0;
    CHECK_THROWS_AS(generate_sbpl(o), agentctl::Error);
    o = options();
    o.lima_home = "relative/.lima";
    CHECK_THROWS_WITH(generate_sbpl(o), Catch::Contains("is not an absolute path"));
    o = options();
    o.lima_home = "/Users/dev/\"))(allow default)";
    CHECK_THROWS_WITH(generate_sbpl(o), Catch::Contains("contains a quote"));
}

TEST_CASE("the command-line form is one line with the same rules", "[sandbox_profile]") {
    auto compact = agentctl::sandbox_profile::compact_sbpl(generate_sbpl(options()));
    CHECK(compact.find('\n') == std::string::npos);
    CHECK(compact.find(";;") == std::string::npos);
    CHECK(compact ==
          "(version 1) (allow default) (deny network-outbound) "
          "(allow network-outbound (remote ip \"localhost:50022\")) "
          "(allow network-outbound (remote ip \"localhost:51234\")) "
          "(allow network-outbound (remote unix-socket (subpath \"/Users/dev/.lima\"))) "
          "(allow network-outbound (remote unix-socket (path-literal \"/private/var/run/mDNSResponder\")))");
}
