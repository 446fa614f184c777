// The command-line surface: help, version, typos, exit codes.
#include <catch2/catch.hpp>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;

TEST_CASE("the version flag prints the version and exits 0") {
    CliSandbox cli;
    auto r = cli.run({"--version"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.rfind("agentctl ", 0) == 0);
}

TEST_CASE("every command and subcommand has help with a description and examples") {
    CliSandbox cli;
    const std::vector<std::vector<std::string>> commands = {
        {"create"},
        {"start"},
        {"stop"},
        {"delete"},
        {"list"},
        {"ls"},
        {"status"},
        {"shell"},
        {"exec"},
        {"view"},
        {"logs"},
        {"snapshot"},
        {"snapshot", "create"},
        {"snapshot", "list"},
        {"snapshot", "restore"},
        {"snapshot", "delete"},
        {"image", "pull"},
        {"image", "build"},
        {"policy", "check"},
        {"policy", "add"},
        {"policy", "remove"},
        {"policy", "budget"},
        {"policy", "propose"},
        {"profile", "list"},
        {"profile", "show"},
        {"profile", "set"},
        {"profile", "presets"},
        {"profile", "packages"},
        {"config", "set"},
        {"config", "get"},
        {"capabilities"},
        {"completion"},
    };
    for (auto args : commands) {
        INFO("agentctl " << args.front() << " " << (args.size() > 1 ? args[1] : "") << " --help");
        args.push_back("--help");
        auto r = cli.run(args);
        CHECK(r.exit_code == 0);
        CHECK(r.out.find("Usage:") != std::string::npos);
        CHECK(r.err.empty());
        if (args.front() != "snapshot" || args.size() > 2) CHECK(r.out.find("Examples:") != std::string::npos);
    }
}

TEST_CASE("the top-level help lists every visible command and hides egress-proxy") {
    CliSandbox cli;
    auto r = cli.run({"--help"});
    REQUIRE(r.exit_code == 0);
    for (const char* verb : {"create", "start", "stop", "delete", "list", "status", "shell", "exec", "view", "logs",
                             "snapshot", "image", "policy", "profile", "config", "capabilities", "completion"}) {
        INFO(verb);
        CHECK(r.out.find(std::string("\n  ") + verb) != std::string::npos);
    }
    CHECK(r.out.find("egress-proxy") == std::string::npos);
    CHECK(r.out.find("--preview") != std::string::npos);
}

TEST_CASE("a mistyped command gets a suggestion and exit 1") {
    CliSandbox cli;
    auto r = cli.run({"creat", "tbox"});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "agentctl: unknown command or argument 'creat'\nhint: did you mean 'create'?\n");

    r = cli.run({"profile", "lst"});
    CHECK(r.exit_code == 1);
    CHECK(r.err == "agentctl: unknown command or argument 'lst'\nhint: did you mean 'list'?\n");
}

TEST_CASE("a mistyped flag gets a suggestion and exit 1") {
    CliSandbox cli;
    auto r = cli.run({"stop", "tbox", "--forse"});
    CHECK(r.exit_code == 1);
    CHECK(r.err == "agentctl: unknown flag '--forse'\nhint: did you mean '--force'?\n");
}

TEST_CASE("a missing argument names it and points at help") {
    CliSandbox cli;
    auto r = cli.run({"stop"});
    CHECK(r.exit_code == 1);
    CHECK(r.err == "agentctl: NAME is required\nhint: run `agentctl stop --help` for usage\n");
}

TEST_CASE("no provider anywhere is an error that says how to choose one") {
    CliSandbox cli;
    auto r = cli.run({"list"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: no provider configured; run `agentctl config set provider=<incus|lima|hyperv>` or pass "
          "--provider\n");
}

TEST_CASE("an invalid sandbox name is refused before anything runs") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "incus", "status", "Bad_Name"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: invalid sandbox name 'Bad_Name'\nhint: use a letter followed by letters, digits and '-' (at "
          "most 63 characters)\n");
}

TEST_CASE("global flags are accepted after the command too") {
    CliSandbox cli;
    auto r = cli.run({"capabilities", "--provider", "hyperv", "--output", "json"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("\"hyperv\"") != std::string::npos);
}

TEST_CASE("logs --network refuses a --since that is neither a duration nor a time, and --summary with --follow") {
    CliSandbox cli;
    auto r = cli.run({"logs", "cli-logs-test", "--network", "--since", "yesterday"});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "agentctl: invalid --since \"yesterday\": it is neither a duration nor a time\n"
          "hint: write a duration such as 30s, 15m, 2h, 7d or 1h30m, or an RFC 3339 time such as "
          "2026-01-02T03:04:05Z\n");
    r = cli.run({"logs", "cli-logs-test", "--summary", "--follow"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("--follow excludes --summary") != std::string::npos);
    r = cli.run({"logs", "cli-logs-test", "--tail", "-3"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("--tail") != std::string::npos);
}

TEST_CASE("policy budget refuses a malformed budget before it looks at any sandbox") {
    CliSandbox cli;
    auto r = cli.run({"policy", "budget", "cli-budget-test", "api.example.com:443"});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "agentctl: invalid budget \"api.example.com:443\": it needs =SIZE\n"
          "hint: write HOST:PORT=SIZE, e.g. api.github.com:443=50MiB\n");
    r = cli.run({"policy", "budget", "cli-budget-test", "93.184.216.34:443=5MiB"});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("93.184.216.34 is an address, which the sandbox's firewall admits without the egress proxy") !=
          std::string::npos);
    // create refuses it before any daemon is reached: it is pointed at none.
    cli.use_incus();
    r = cli.run({"create", "cli-budget-test", "--isolation", "container", "--budget", "93.184.216.34:443=5MiB"},
                {{"INCUS_SOCKET", (cli.root() / "no-daemon.socket").string()}});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("93.184.216.34 is an address") != std::string::npos);
}

TEST_CASE("policy add --for refuses a bad duration, and an address, before it looks at any sandbox") {
    CliSandbox cli;
    auto r = cli.run({"policy", "add", "cli-grant-test", "api.example.com:443", "--for", "0s"});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "agentctl: invalid --for \"0s\": a duration such as 90s, 30m, 1h, 7d or 1h30m\n"
          "hint: agentctl policy add NAME api.example.com:443 --for 1h\n");
    r = cli.run({"policy", "add", "cli-grant-test", "93.184.216.34:443", "--for", "1h"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.starts_with("agentctl: 93.184.216.34:443 is an address: a grant with --for is for host names"));
    CHECK(r.err.find("hint: allow it for good (`agentctl policy add cli-grant-test 93.184.216.34:443`)") !=
          std::string::npos);
}
