#include <catch2/catch.hpp>

#include <filesystem>

#include "agentctl/error.hpp"
#include "policy/secret_store.hpp"
#include "support/recording_runner.hpp"
#include "support/temp_dir.hpp"

using namespace agentctl;
using namespace agentctl::policy;
namespace fs = std::filesystem;

TEST_CASE("a stored secret reads back with its source and hosts", "[secret]") {
    test::TempDir state;
    StoredSecret secret{"internal", SecretSource::File, "v4lue", "/tmp/token", {{"api.example.test", "x-api-key"}}};
    save_secret(state.path, secret);
    auto loaded = load_secret(state.path, "internal");
    REQUIRE(loaded);
    CHECK(loaded->value == "v4lue");
    CHECK(loaded->source == SecretSource::File);
    CHECK(loaded->from == "/tmp/token");
    CHECK(loaded->hosts == secret.hosts);
    CHECK_FALSE(load_secret(state.path, "other"));
    CHECK(remove_secret(state.path, "internal"));
    CHECK(list_secrets(state.path).empty());
}

TEST_CASE("a catalog name brings its hosts and headers", "[secret]") {
    auto hosts = effective_hosts({"github", SecretSource::Value, "x", "", {}});
    REQUIRE(hosts.size() == 2);
    CHECK(hosts[0] == SecretHost{"api.github.com", "authorization"});
    CHECK(hosts[1] == SecretHost{"github.com", "authorization"});
    CHECK(effective_hosts({"anthropic", SecretSource::Value, "x", "", {}}).at(0) ==
          SecretHost{"api.anthropic.com", "x-api-key"});
    CHECK(effective_hosts({"unknown", SecretSource::Value, "x", "", {}}).empty());
}

TEST_CASE("a command secret runs its command for the value and a failure never shows the output", "[secret]") {
    test::RecordingProcessRunner runner;
    StoredSecret secret{"github", SecretSource::Command, "", "gh auth token", {}};
    ProcessResult ok;
    ok.out = "gho_abc123\n";
    runner.expect(ok);
    CHECK(secret_value(secret, runner) == "gho_abc123");
    CHECK(runner.command_lines().back() == "sh -c 'gh auth token'");

    ProcessResult failed;
    failed.exit_code = 4;
    failed.out = "gho_partial_leak";
    runner.expect(failed);
    try {
        (void)secret_value(secret, runner);
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(std::string(e.what()) == "secret github: its command `gh auth token` failed (exit code 4)");
        CHECK(std::string(e.what()).find("gho_partial_leak") == std::string::npos);
    }
}

TEST_CASE("secret names and values are checked", "[secret]") {
    CHECK_NOTHROW(check_secret_name("github"));
    CHECK_NOTHROW(check_secret_name("ANTHROPIC_API_KEY"));
    CHECK_THROWS_AS(check_secret_name("../x"), Error);
    CHECK_THROWS_AS(check_secret_name(""), Error);
    CHECK_THROWS_AS(check_secret_name(".hidden"), Error);
    CHECK_THROWS_AS(check_secret_value("x", "a\r\nX-Injected: 1"), Error);
    CHECK_THROWS_AS(check_secret_value("x", ""), Error);
}

TEST_CASE("create --secret resolves variables, adds the agent's stored credential and refuses what is missing",
          "[secret]") {
    test::TempDir state;
    save_secret(state.path, {"github", SecretSource::Value, "x", "", {}});
    save_secret(state.path, {"anthropic", SecretSource::Value, "y", "", {}});
    save_secret(state.path, {"my-api.key", SecretSource::Value, "z", "", {{"api.example.test", "x-api-key"}}});
    auto uses = secret_uses(state.path, {"github", "my-api.key", "anthropic=CLAUDE_KEY"}, "", true);
    REQUIRE(uses.size() == 3);
    CHECK(uses[0] == SecretUse{"github", "GH_TOKEN"});
    CHECK(uses[1] == SecretUse{"my-api.key", "MY_API_KEY"});
    CHECK(uses[2] == SecretUse{"anthropic", "CLAUDE_KEY"});
    // --agent claude brings the stored anthropic secret; codex's openai secret is not stored.
    CHECK(secret_uses(state.path, {}, "claude", true) == std::vector<SecretUse>{{"anthropic", "ANTHROPIC_API_KEY"}});
    CHECK(secret_uses(state.path, {}, "codex", true).empty());
    CHECK(secret_uses(state.path, {}, "", false).empty());

    auto error_of = [&](std::vector<std::string> flags, bool network = true) {
        try {
            (void)secret_uses(state.path, flags, "", network);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(error_of({"openai"}) == "--secret openai: no secret of that name is stored");
    CHECK(error_of({"github=1BAD"}) == "--secret github=1BAD: \"1BAD\" is not an environment variable name");
    CHECK(error_of({"github", "anthropic=GH_TOKEN"}) == "--secret anthropic: the variable GH_TOKEN is given twice");
    CHECK(error_of({"github"}, false).starts_with("--secret needs the egress proxy"));
}

TEST_CASE("a variable bound twice is refused, the agent's credential and agentctl's own variables included",
          "[secret]") {
    test::TempDir state;
    save_secret(state.path, {"github", SecretSource::Value, "x", "", {}});
    save_secret(state.path, {"anthropic", SecretSource::Value, "y", "", {}});
    auto error_of = [&](std::vector<std::string> flags, const std::string& agent) {
        try {
            (void)secret_uses(state.path, flags, agent, true);
        } catch (const Error& e) {
            return std::string(e.what()) + "\nhint: " + e.hint();
        }
        return std::string();
    };
    // --agent claude brings the stored anthropic secret into ANTHROPIC_API_KEY: a second one there is refused.
    CHECK(error_of({"github=ANTHROPIC_API_KEY"}, "claude") ==
          "--secret github=ANTHROPIC_API_KEY: --agent claude already puts its stored secret anthropic in "
          "ANTHROPIC_API_KEY\nhint: one secret per variable: drop --secret github=ANTHROPIC_API_KEY, or bind "
          "anthropic elsewhere (--secret anthropic=ANOTHER_VARIABLE)");
    // Binding the agent's own secret elsewhere frees the variable.
    CHECK(secret_uses(state.path, {"anthropic=CLAUDE_KEY", "github=ANTHROPIC_API_KEY"}, "claude", true) ==
          std::vector<SecretUse>{{"anthropic", "CLAUDE_KEY"}, {"github", "ANTHROPIC_API_KEY"}});
    CHECK(error_of({"github", "github=OTHER"}, "") ==
          "--secret github: the secret is given twice\nhint: give each "
          "secret, and each variable, once");
    // The variables agentctl sets itself would silently win over the placeholder.
    CHECK(error_of({"github=SSL_CERT_FILE"}, "")
              .starts_with("--secret github=SSL_CERT_FILE: agentctl sets SSL_CERT_FILE in the sandbox itself (where "
                           "programs find the "
                           "sandbox CA: /etc/ssl/certs/ca-certificates.crt)"));
    CHECK(error_of({"github=NODE_EXTRA_CA_CERTS"}, "") != "");
    CHECK(error_of({"github=HTTPS_PROXY"}, "")
              .starts_with("--secret github=HTTPS_PROXY: agentctl sets HTTPS_PROXY in the sandbox itself (it points "
                           "programs at the "
                           "egress proxy)"));
    CHECK(error_of({"github=npm_config_https_proxy"}, "") != "");
}
