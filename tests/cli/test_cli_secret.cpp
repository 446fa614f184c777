// `agentctl secret`: values are stored 0600 on the host and never printed.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_value = "sk-test-7f3c2a91d0e4b6";

fs::path secrets_dir(const CliSandbox& cli) { return cli.home() / ".local/state/agentctl/secrets"; }

unsigned mode_of(const fs::path& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

void check_never_shows_value(const agentctl::ProcessResult& result) {
    CHECK(result.out.find(k_value) == std::string::npos);
    CHECK(result.err.find(k_value) == std::string::npos);
}

}  // namespace

TEST_CASE("secret set from stdin stores the value 0600 and never prints it", "[cli][secret]") {
    CliSandbox cli;
    auto set = cli.run({"secret", "set", "anthropic"}, {}, std::string(k_value) + "\n");
    INFO(set.err);
    REQUIRE(set.exit_code == 0);
    check_never_shows_value(set);
    CHECK(mode_of(secrets_dir(cli)) == 0700);
    const auto file = secrets_dir(cli) / "anthropic.json";
    CHECK(mode_of(file) == 0600);
    auto stored = nlohmann::json::parse(std::ifstream(file));
    CHECK(stored["value"] == k_value);  // the trailing newline of `echo` is not part of it

    for (auto output : {"table", "json"}) {
        auto list = cli.run({"secret", "list", "--output", output});
        REQUIRE(list.exit_code == 0);
        check_never_shows_value(list);
        CHECK(list.out.find("anthropic") != std::string::npos);
        CHECK(list.out.find("api.anthropic.com") != std::string::npos);
        CHECK(list.out.find("x-api-key") != std::string::npos);
    }
    auto json = nlohmann::json::parse(cli.run({"secret", "list", "-o", "json"}).out);
    REQUIRE(json.size() == 1);
    CHECK(json[0]["source"] == "stdin");
    CHECK(json[0]["env"] == "ANTHROPIC_API_KEY");
    CHECK(json[0]["hostsFrom"] == "catalog");
    CHECK_FALSE(json[0].contains("value"));
}

TEST_CASE("secret set --from-env, --from-file and --from-command record their source", "[cli][secret]") {
    CliSandbox cli;
    cli.write(cli.root() / "token", std::string(k_value) + "\n");
    REQUIRE(cli.run({"secret", "set", "github", "--from-env", "MY_TOKEN"}, {{"MY_TOKEN", k_value}}).exit_code == 0);
    REQUIRE(cli.run({"secret", "set", "internal", "--from-file", (cli.root() / "token").string(), "--host",
                     "api.example.test", "--header", "X-Api-Key"})
                .exit_code == 0);
    REQUIRE(cli.run({"secret", "set", "openai", "--from-command", "printf %s \"$SOMETHING\""}).exit_code == 0);
    auto list = cli.run({"secret", "list", "-o", "json"});
    check_never_shows_value(list);
    auto json = nlohmann::json::parse(list.out);
    REQUIRE(json.size() == 3);
    CHECK(json[0]["name"] == "github");
    CHECK(json[0]["source"] == "env");
    CHECK(json[0]["from"] == "MY_TOKEN");
    CHECK(json[0]["hosts"].size() == 2);
    CHECK(json[1]["name"] == "internal");
    CHECK(json[1]["source"] == "file");
    CHECK(json[1]["hosts"][0] == nlohmann::json{{"host", "api.example.test"}, {"header", "x-api-key"}});
    CHECK(json[1]["hostsFrom"] == "secret");
    CHECK(json[2]["source"] == "command");
    CHECK(json[2]["from"] == "printf %s \"$SOMETHING\"");
    auto stored = nlohmann::json::parse(std::ifstream(secrets_dir(cli) / "openai.json"));
    CHECK_FALSE(stored.contains("value"));  // a command's value is fetched at each start, never kept
    for (auto name : {"github", "internal", "openai"})
        CHECK(mode_of(secrets_dir(cli) / (std::string(name) + ".json")) == 0600);
}

TEST_CASE("secret set refuses what it cannot inject and changes nothing", "[cli][secret]") {
    CliSandbox cli;
    auto no_host = cli.run({"secret", "set", "mystery"}, {}, k_value);
    CHECK(no_host.exit_code == 1);
    CHECK(no_host.err.find("agentctl: secret mystery: no host to inject it into") != std::string::npos);
    CHECK(no_host.err.find("hint: pass --host HOST") != std::string::npos);
    check_never_shows_value(no_host);

    auto empty = cli.run({"secret", "set", "github"}, {}, "");
    CHECK(empty.exit_code == 1);
    CHECK(empty.err.find("secret github: the value is empty") != std::string::npos);

    auto two_lines = cli.run({"secret", "set", "github"}, {}, std::string(k_value) + "\nsecond\n");
    CHECK(two_lines.exit_code == 1);
    CHECK(two_lines.err.find("line break") != std::string::npos);
    check_never_shows_value(two_lines);

    auto unset = cli.run({"secret", "set", "github", "--from-env", "AGENTCTL_TEST_UNSET_VARIABLE"});
    CHECK(unset.exit_code == 1);
    CHECK(unset.err.find("--from-env AGENTCTL_TEST_UNSET_VARIABLE: the variable is not set") != std::string::npos);

    auto bad_name = cli.run({"secret", "set", "../escape"}, {}, k_value);
    CHECK(bad_name.exit_code == 1);
    CHECK(bad_name.err.find("invalid secret name") != std::string::npos);

    auto preview = cli.run({"secret", "set", "github", "--preview"}, {}, k_value);
    CHECK(preview.exit_code == 0);
    check_never_shows_value(preview);
    CHECK(preview.out.find("would store secret github (stdin)") != std::string::npos);
    CHECK_FALSE(fs::exists(secrets_dir(cli)));
}

TEST_CASE("secret rm removes the secret and refuses an unknown name", "[cli][secret]") {
    CliSandbox cli;
    REQUIRE(cli.run({"secret", "set", "github"}, {}, k_value).exit_code == 0);
    auto rm = cli.run({"secret", "rm", "github"});
    CHECK(rm.exit_code == 0);
    CHECK_FALSE(fs::exists(secrets_dir(cli) / "github.json"));
    auto again = cli.run({"secret", "rm", "github"});
    CHECK(again.exit_code == 1);
    CHECK(again.err.find("agentctl: no secret named github") != std::string::npos);
    CHECK(again.err.find("hint: agentctl secret list") != std::string::npos);
}

TEST_CASE("create refuses a variable bound twice, for real and under --preview, and makes nothing", "[cli][secret]") {
    CliSandbox cli;
    cli.use_incus();
    REQUIRE(cli.run({"secret", "set", "anthropic"}, {}, k_value).exit_code == 0);
    REQUIRE(cli.run({"secret", "set", "github"}, {}, "gho_other").exit_code == 0);
    const auto before = agentctl::test::tree_listing(cli.root());
    for (bool preview : {true, false}) {
        std::vector<std::string> args{"create",      "u28-double",
                                      "--isolation", "container",
                                      "--image",     "agentctl-debian-12",
                                      "--agent",     "claude",
                                      "--secret",    "github=ANTHROPIC_API_KEY"};
        if (preview) args.insert(args.begin(), "--preview");
        // The refusal comes before any daemon is reached: the real run is pointed at none.
        auto r = cli.run(args, {{"INCUS_SOCKET", (cli.root() / "no-daemon.socket").string()}});
        INFO(r.err);
        CHECK(r.exit_code == 1);
        CHECK(r.err.find("agentctl: --secret github=ANTHROPIC_API_KEY: --agent claude already puts its stored secret "
                         "anthropic in ANTHROPIC_API_KEY") != std::string::npos);
        CHECK(r.out.find("/1.0/instances") == std::string::npos);  // not even previewed
        check_never_shows_value(r);
        CHECK(agentctl::test::tree_listing(cli.root()) == before);
    }
}

TEST_CASE("profile secret bindings and organisation forbids: create --preview shows the bindings, never the value",
          "[cli][secret]") {
    CliSandbox cli;
    cli.use_incus();
    REQUIRE(cli.run({"secret", "set", "github"}, {}, k_value).exit_code == 0);
    const auto org_profile = cli.org_dir() / "profiles/team.yaml";
    cli.write(org_profile, R"(apiVersion: agentctl.dev/v1
kind: Profile
spec:
  secrets:
    forbid:
      - {secret: github, host: github.com}
)");
    const auto user_profile = cli.home() / ".config/agentctl/profiles/team.yaml";
    cli.write(user_profile, R"(apiVersion: agentctl.dev/v1
kind: Profile
spec:
  network:
    allowPresets: [github]
  secrets:
    bind:
      - name: github
        env: TEAM_GH
)");
    const auto before = agentctl::test::tree_listing(cli.root());
    auto r = cli.run({"--preview", "create", "u28-profile", "--isolation", "container", "--image", "agentctl-debian-12",
                      "--profile", "team", "--mount-none"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    check_never_shows_value(r);
    CHECK(r.err.find("secret github is not injected into github.com: profile team (" + org_profile.string() +
                     ":6) spec.secrets.forbid[0] forbids it") != std::string::npos);
    CHECK(r.err.find("secret github in TEAM_GH, injected into api.github.com (authorization); from profile team (" +
                     user_profile.string() + ":8) spec.secrets.bind[0]") != std::string::npos);
    CHECK(r.out.find("environment.TEAM_GH\":\"agentctl-secret-github-") != std::string::npos);
    CHECK(agentctl::test::tree_listing(cli.root()) == before);

    // A --secret flag cannot bind the secret a second time, nor lift the forbid.
    r = cli.run({"--preview", "create", "u28-profile", "--profile", "team", "--mount-none", "--secret", "github"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("agentctl: --secret github: secret github is already bound by profile team (" +
                     user_profile.string() + ":8) spec.secrets.bind[0]") != std::string::npos);

    // A binding the store cannot satisfy names the file, line and field; so does a malformed one.
    cli.write(user_profile, R"(apiVersion: agentctl.dev/v1
kind: Profile
spec:
  secrets:
    bind:
      - name: nosuch
)");
    r = cli.run({"--preview", "create", "u28-profile", "--profile", "team", "--mount-none"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("profile team (" + user_profile.string() +
                     ":6) spec.secrets.bind[0]: no secret named nosuch is "
                     "stored") != std::string::npos);
    cli.write(user_profile, R"(apiVersion: agentctl.dev/v1
kind: Profile
spec:
  secrets:
    bind:
      - name: github
        hosts: [{host: github.com}]
)");
    r = cli.run({"--preview", "create", "u28-profile", "--profile", "team", "--mount-none"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("profile team (" + user_profile.string() +
                     ":6) spec.secrets.bind[0]: secret github has no host "
                     "left to go to (profile team (" +
                     org_profile.string() +
                     ":6) spec.secrets.forbid[0] forbids "
                     "it on github.com)") != std::string::npos);
    cli.write(user_profile,
              "apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  secrets:\n    bind:\n"
              "      - {name: github, env: HTTPS_PROXY}\n");
    r = cli.run({"--preview", "create", "u28-profile", "--profile", "team", "--mount-none"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(user_profile.string() + ":6:") != std::string::npos);
    CHECK(r.err.find("field spec.secrets.bind[0].env: agentctl sets HTTPS_PROXY in the sandbox itself") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(cli.home() / ".local/state/agentctl/incus"));  // no sandbox state was made
}
