// What people who live in incus, gh and docker expect: help without flags,
// a version command, short flags, aliases, several names, a man page.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "support/build_paths.hpp"

using agentctl::test::CliSandbox;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("agentctl alone and agentctl help print the help") {
    CliSandbox cli;
    auto alone = cli.run({});
    CHECK(alone.exit_code == 0);
    CHECK(alone.err.empty());
    CHECK(contains(alone.out, "Usage:"));
    CHECK(contains(alone.out, "\n  create"));
    CHECK(alone.out == cli.run({"--help"}).out);
    CHECK(cli.run({"help"}).out == alone.out);

    auto help_create = cli.run({"help", "create"});
    CHECK(help_create.exit_code == 0);
    CHECK(help_create.out == cli.run({"create", "--help"}).out);
    CHECK(cli.run({"help", "profile", "show"}).out == cli.run({"profile", "show", "--help"}).out);
    CHECK(cli.run({"help", "rm"}).out == cli.run({"delete", "--help"}).out);

    auto typo = cli.run({"help", "creat"});
    CHECK(typo.exit_code == 1);
    CHECK(typo.err == "agentctl: no command 'creat'\nhint: did you mean 'create'?\n");
}

TEST_CASE("version prints the version, the commit and why the backend's version is unavailable") {
    CliSandbox cli;
    auto r = cli.run({"version"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.rfind("Version:  ", 0) == 0);
    CHECK(contains(r.out, "\nCommit:   "));
    CHECK(contains(r.out, "\nBackend:  unavailable (no provider configured"));
    // The version flag says the same version.
    const auto version = r.out.substr(10, r.out.find('\n') - 10);
    CHECK(cli.run({"--version"}).out == "agentctl " + version + "\n");

    auto json = cli.run({"version", "--format", "json"});
    REQUIRE(json.exit_code == 0);
    auto doc = nlohmann::json::parse(json.out);
    CHECK(doc["version"] == version);
    CHECK(doc["backend"].is_null());
    CHECK(contains(doc["backend_unavailable"].get<std::string>(), "no provider configured"));
    // In a git checkout the commit is known and the version carries it.
    if (std::filesystem::exists(std::filesystem::path(agentctl::test::source_dir()) / ".git")) {
        const auto commit = doc["commit"].get<std::string>();
        CHECK(commit.size() == 12);
        CHECK(contains(version, "g" + commit));
    }
}

TEST_CASE("the short force flag, the rm alias, --format and several names") {
    CliSandbox cli;
    // A preview on the Hyper-V provider prints the plan without a Hyper-V host.
    auto r = cli.run({"--provider", "hyperv", "--preview", "stop", "-f", "one", "two"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    // One plan per name, in order: PowerShell quoting makes the name '\''one'\''.
    const auto one = r.out.find("Stop-VM -Name '\\''one'\\'' -TurnOff");
    const auto two = r.out.find("Stop-VM -Name '\\''two'\\'' -TurnOff");
    CHECK(one != std::string::npos);
    CHECK(two != std::string::npos);
    CHECK(one < two);

    r = cli.run({"--provider", "hyperv", "--preview", "rm", "-f", "one", "two"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "'one'"));
    CHECK(contains(r.out, "'two'"));

    // A name given twice is acted on once; start takes several names too.
    r = cli.run({"--provider", "hyperv", "--preview", "stop", "-f", "one", "one"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "powershell.exe -NoProfile -NonInteractive -Command 'Stop-VM -Name '\\''one'\\'' -TurnOff'\n");
    r = cli.run({"--provider", "hyperv", "--preview", "start", "one", "two", "one"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out ==
          "powershell.exe -NoProfile -NonInteractive -Command 'Start-VM -Name '\\''one'\\'''\n"
          "powershell.exe -NoProfile -NonInteractive -Command 'Start-VM -Name '\\''two'\\'''\n");

    // Every name is checked before anything runs.
    r = cli.run({"--provider", "hyperv", "--preview", "stop", "good", "Bad_Name"});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "invalid sandbox name 'Bad_Name'"));

    r = cli.run({"config", "get", "--format", "json"});
    CHECK(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.out).contains("provider"));
}

TEST_CASE("exec: -e takes one value each, so NAME and -- after it stay what they are; -w must be absolute") {
    CliSandbox cli;
    // The Hyper-V provider refuses exec at its gate (exit 2), after the command line was read.
    auto r = cli.run({"--provider", "hyperv", "exec", "-e", "A=1", "-e", "B", "tbox", "--", "sh", "-c", "true"});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("exec is under development on the hyperv provider"));
    r = cli.run({"--provider", "hyperv", "exec", "-w", "tmp", "tbox", "--", "pwd"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("agentctl: -w tmp: the working directory must be an absolute path\n"));
    r = cli.run({"--provider", "hyperv", "exec", "-e", "=x", "tbox", "--", "true"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("agentctl: -e =x: the variable has no name\n"));
}

TEST_CASE("the man page is generated from the command tree") {
    CliSandbox cli;
    auto r = cli.run({"man"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.rfind(".\\\" Generated by `agentctl man`", 0) == 0);
    CHECK(contains(r.out, ".TH AGENTCTL 1"));
    for (const char* verb : {"create", "start", "stop", "delete", "list", "status", "shell", "exec", "view", "logs",
                             "snapshot create", "image build", "policy check", "profile show", "config set",
                             "capabilities", "completion", "version", "help"}) {
        INFO(verb);
        CHECK(contains(r.out, std::string(".SS \"agentctl ") + verb));
    }
    CHECK(contains(r.out, "\\fB\\-\\-allow\\-file\\fR \\fIFILE\\fR"));
    CHECK(contains(r.out, "agentctl create demo \\-\\-allow api.github.com:443"));
    CHECK_FALSE(contains(r.out, "egress\\-proxy"));
    CHECK_FALSE(contains(r.out, "__complete"));
    // groff renders it without warnings.
    if (!std::filesystem::exists("/usr/bin/groff")) {
        WARN("not rendered: groff is not installed");
        return;
    }
    const auto page = cli.home() / "agentctl.1";
    cli.write(page, r.out);
    auto runner = agentctl::make_real_process_runner();
    agentctl::ProcessRequest request;
    request.argv = {"groff", "-man", "-Tutf8", "-ww", "-z", page.string()};
    auto rendered = runner->run(request);
    CHECK(rendered.exit_code == 0);
    CHECK(rendered.err.empty());
}
