// -v and --log-level: every Incus request (method, path, status, time) and each
// step's time go to stderr, and nothing of it without -v.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <regex>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;

namespace {
bool incus_reachable() { return ::access("/var/lib/incus/unix.socket", W_OK) == 0; }
}  // namespace

TEST_CASE("verbose output logs every Incus request with its status and time") {
    if (!incus_reachable()) {
        WARN("no Incus daemon reachable: skipped");
        return;
    }
    CliSandbox cli;
    auto r = cli.run({"-v", "--provider", "incus", "list"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(std::regex_search(r.err, std::regex(R"(agentctl \[info\] incus GET /1\.0/instances\S* -> 200 \(\d+ ms\))")));
    auto quiet = cli.run({"--provider", "incus", "list"});
    CHECK(quiet.exit_code == 0);
    CHECK(quiet.err.find("incus GET") == std::string::npos);
    auto warn = cli.run({"-v", "--log-level", "warn", "--provider", "incus", "list"});
    CHECK(warn.err.find("incus GET") == std::string::npos);  // --log-level wins over -v
    auto errors = cli.run({"--log-level", "info", "--provider", "incus", "status", "no-such-sandbox-here"});
    CHECK(std::regex_search(errors.err,
                            std::regex(R"(incus GET /1\.0/instances/no-such-sandbox-here\S* -> 404 \(\d+ ms\))")));
}

TEST_CASE("verbose output gives each step time") {
    CliSandbox cli;
    auto r = cli.run({"-v", "--provider", "incus", "--preview", "create", "itest-preview", "--isolation", "container",
                      "--mount-none"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(std::regex_search(r.err, std::regex(R"(agentctl \[info\] step "[^"]+" took \d+ ms)")));
    auto quiet = cli.run(
        {"--provider", "incus", "--preview", "create", "itest-preview", "--isolation", "container", "--mount-none"});
    CHECK(quiet.err.find("took") == std::string::npos);
}
