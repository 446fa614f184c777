// --remote and incus.remote, run through the built binary with a private
// incus client configuration (INCUS_CONF): the remote is chosen, -v names the
// endpoint, --preview addresses it, and bad names and providers are refused.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;

namespace {

// An incus client configuration with remote `lo` on a loopback port nothing
// listens on (port 1), and a client certificate pair.
std::map<std::string, std::string> incus_conf(CliSandbox& cli) {
    const auto dir = cli.root() / "incus";
    cli.write(dir / "config.yml", "default-remote: local\nremotes:\n  lo:\n    addr: https://127.0.0.1:1\n");
    cli.write(dir / "client.crt", "not used before a connection\n");
    cli.write(dir / "client.key", "not used before a connection\n");
    return {{"INCUS_CONF", dir.string()}};
}

}  // namespace

TEST_CASE("an unknown remote is refused, listing the known ones", "[remote]") {
    CliSandbox cli;
    cli.use_incus();
    const auto env = incus_conf(cli);
    auto r = cli.run({"--remote", "nosuch", "list"}, env);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("agentctl: unknown Incus remote \"nosuch\" (known: lo, local; from " +
                                        (cli.root() / "incus/config.yml").string() + ")\n"));
    CHECK_THAT(r.err, Catch::Contains("hint: add it with `incus remote add nosuch https://HOST:8443`"));
}

TEST_CASE("incus.remote chooses the remote, --remote wins, and -v names the endpoint", "[remote]") {
    CliSandbox cli;
    cli.use_incus();
    auto env = incus_conf(cli);
    REQUIRE(cli.run({"config", "set", "incus.remote=nosuch"}, env).exit_code == 0);
    auto r = cli.run({"list"}, env);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("unknown Incus remote \"nosuch\""));
    // The client pair is not a certificate: using the remote fails on it, naming the file.
    r = cli.run({"--remote", "lo", "-v", "list"}, env);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("incus: using the remote lo at https://127.0.0.1:1 (this machine)"));
    CHECK_THAT(r.err, Catch::Contains("cannot use the client certificate " +
                                      (cli.root() / "incus/client.crt").string() + " of Incus remote \"lo\""));
}

TEST_CASE("a remote (--remote) without a configured provider means the incus provider", "[remote]") {
    CliSandbox cli;  // no provider configured
    auto env = incus_conf(cli);
    auto r = cli.run({"--remote", "nosuch", "list"}, env);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("agentctl: unknown Incus remote \"nosuch\" (known: lo, local;"));
    CHECK_THAT(r.err, !Catch::Contains("no provider configured"));
    r = cli.run({"--remote", "local", "--preview", "stop", "itest-preview"}, env);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out,
               Catch::StartsWith("incus query -X GET ") && Catch::Contains("local:/1.0/instances/itest-preview"));
    // Without --remote nothing is implied.
    r = cli.run({"list"}, env);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("no provider configured"));
}

TEST_CASE("a preview prints incus query lines addressed to the remote (--preview --remote)", "[remote]") {
    CliSandbox cli;
    cli.use_incus();
    auto env = incus_conf(cli);
    auto r = cli.run({"--remote", "local", "--preview", "stop", "itest-preview"}, env);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    // In the project the environment names (scripts/test.sh: the tests' own), in the path.
    const char* project = std::getenv("INCUS_PROJECT");
    const std::string path = "local:/1.0/instances/itest-preview";
    CHECK_THAT(r.out,
               Catch::StartsWith(project && *project ? "incus query -X GET '" + path + "?project=" + project + "'\n"
                                                     : "incus query -X GET " + path + "\n"));
}

TEST_CASE("the remote option (--remote) is for Incus, and its value must be a remote name", "[remote]") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "lima", "--remote", "build", "list"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("--remote names an Incus remote, but the provider is lima"));
    r = cli.run({"--provider", "incus", "--remote", "a:b", "list"});
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("must be the name of a remote of the incus client"));
    r = cli.run({"config", "set", "incus.remote=bad/name"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("invalid value for incus.remote"));
}
