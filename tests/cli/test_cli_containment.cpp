// What `create` says and asks Incus for about containment, through the built
// binary in --preview (no daemon is contacted): the process limit flag, the
// warning for a port published beyond loopback, and the containment keys.
#include <catch2/catch.hpp>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;

namespace {
const std::vector<std::string> k_base{"--provider",    "incus",       "--preview", "create",
                                      "itest-preview", "--isolation", "container", "--mount-none"};

std::vector<std::string> with(std::vector<std::string> extra) {
    auto args = k_base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}
}  // namespace

TEST_CASE("containment: --processes is checked and becomes limits.processes") {
    CliSandbox cli;
    auto bad = cli.run(with({"--processes", "0"}));
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("invalid --processes \"0\": a whole number from 1 to 1000000") != std::string::npos);
    auto ok = cli.run(with({"--processes", "50"}));
    REQUIRE(ok.exit_code == 0);
    CHECK(ok.out.find("\"limits.processes\":\"50\"") != std::string::npos);
    CHECK(ok.out.find("\"security.idmap.isolated\":\"true\"") != std::string::npos);
    CHECK(ok.out.find("\"security.guestapi\":\"false\"") != std::string::npos);
    // The default profile's limit when no flag lowers it; a higher flag does not raise it.
    auto raised = cli.run(with({"--processes", "100000"}));
    CHECK(raised.out.find("\"limits.processes\":\"2048\"") != std::string::npos);
}

TEST_CASE("containment: a port beyond loopback is warned about, a loopback one is not") {
    CliSandbox cli;
    auto r = cli.run(with({"--port", "0.0.0.0:18080:80", "--port", "18081:81"}));
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("WARNING: published port on a non-loopback address: 0.0.0.0:18080 -> 80/tcp") !=
          std::string::npos);
    CHECK(r.err.find("18081 -> 81") == std::string::npos);
    CHECK(r.out.find("\"listen\":\"tcp:127.0.0.1:18081\"") != std::string::npos);
}
