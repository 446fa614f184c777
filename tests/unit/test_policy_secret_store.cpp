#include <catch2/catch.hpp>

#include <filesystem>

#include "agentctl/error.hpp"
#include "policy/secret_store.hpp"
#include "support/error_text.hpp"
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

namespace {

std::vector<SecretBinding> flags_of(const std::vector<std::string>& flags) {
    std::vector<SecretBinding> bindings;
    for (const auto& flag : flags) bindings.push_back(parse_secret_flag(flag));
    return bindings;
}

// The names and variables of `uses`, as "name=ENV".
std::vector<std::string> variables_of(const std::vector<SecretUse>& uses) {
    std::vector<std::string> out;
    for (const auto& use : uses) out.push_back(use.name + "=" + use.env);
    return out;
}

}  // namespace

TEST_CASE("create --secret resolves variables, adds the agent's stored credential and refuses what is missing",
          "[secret]") {
    test::TempDir state;
    save_secret(state.path, {"github", SecretSource::Value, "x", "", {}});
    save_secret(state.path, {"anthropic", SecretSource::Value, "y", "", {}});
    save_secret(state.path, {"my-api.key", SecretSource::Value, "z", "", {{"api.example.test", "x-api-key"}}});
    auto uses = secret_uses(state.path, flags_of({"github", "my-api.key", "anthropic=CLAUDE_KEY"}), {}, "", true);
    REQUIRE(uses.size() == 3);
    CHECK(uses[0] == SecretUse{"github",
                               "GH_TOKEN",
                               {{"api.github.com", "authorization"}, {"github.com", "authorization"}},
                               "--secret github"});
    CHECK(uses[1] == SecretUse{"my-api.key", "MY_API_KEY", {{"api.example.test", "x-api-key"}}, "--secret my-api.key"});
    CHECK(variables_of(uses).back() == "anthropic=CLAUDE_KEY");
    // --agent claude brings the stored anthropic secret; codex's openai secret is not stored.
    CHECK(secret_uses(state.path, {}, {}, "claude", true) ==
          std::vector<SecretUse>{
              {"anthropic", "ANTHROPIC_API_KEY", {{"api.anthropic.com", "x-api-key"}}, "agent claude"}});
    CHECK(secret_uses(state.path, {}, {}, "codex", true).empty());
    CHECK(secret_uses(state.path, {}, {}, "", false).empty());

    auto flags_error = [&](std::vector<std::string> flags, bool network = true) {
        return test::error_and_hint_of([&] { (void)secret_uses(state.path, flags_of(flags), {}, "", network); });
    };
    CHECK(flags_error({"openai"}).starts_with("--secret openai: no secret named openai is stored\n"));
    CHECK(
        flags_error({"github=1BAD"}).starts_with("--secret github=1BAD: \"1BAD\" is not an environment variable name"));
    CHECK(flags_error({"github", "anthropic=GH_TOKEN"})
              .starts_with("--secret anthropic=GH_TOKEN: the variable GH_TOKEN already holds secret github (--secret "
                           "github)\n"));
    CHECK(flags_error({"github"}, false).starts_with("--secret needs the egress proxy"));
}

TEST_CASE("a variable bound twice is refused, the agent's credential and agentctl's own variables included",
          "[secret]") {
    test::TempDir state;
    save_secret(state.path, {"github", SecretSource::Value, "x", "", {}});
    save_secret(state.path, {"anthropic", SecretSource::Value, "y", "", {}});
    auto flags_error = [&](std::vector<std::string> flags, const std::string& agent) {
        return test::error_and_hint_of([&] { (void)secret_uses(state.path, flags_of(flags), {}, agent, true); });
    };
    // --agent claude brings the stored anthropic secret into ANTHROPIC_API_KEY: a second one there is refused.
    CHECK(flags_error({"github=ANTHROPIC_API_KEY"}, "claude") ==
          "--secret github=ANTHROPIC_API_KEY: --agent claude already puts its stored secret anthropic in "
          "ANTHROPIC_API_KEY\nhint: one secret per variable: drop that binding, or bind anthropic elsewhere (--secret "
          "anthropic=ANOTHER_VARIABLE)");
    // Binding the agent's own secret elsewhere frees the variable.
    CHECK(variables_of(secret_uses(state.path, flags_of({"anthropic=CLAUDE_KEY", "github=ANTHROPIC_API_KEY"}), {},
                                   "claude", true)) ==
          std::vector<std::string>{"anthropic=CLAUDE_KEY", "github=ANTHROPIC_API_KEY"});
    CHECK(flags_error({"github", "github=OTHER"}, "") ==
          "--secret github=OTHER: secret github is already bound by --secret github\nhint: bind each secret once: "
          "drop one of the two");
    // The variables agentctl sets itself would silently win over the placeholder.
    CHECK(flags_error({"github=SSL_CERT_FILE"}, "")
              .starts_with("--secret github=SSL_CERT_FILE: agentctl sets SSL_CERT_FILE in the sandbox itself (where "
                           "programs find the sandbox CA: /etc/ssl/certs/ca-certificates.crt)"));
    CHECK(flags_error({"github=NODE_EXTRA_CA_CERTS"}, "") != test::k_no_error);
    CHECK(flags_error({"github=HTTPS_PROXY"}, "")
              .starts_with("--secret github=HTTPS_PROXY: agentctl sets HTTPS_PROXY in the sandbox itself (it points "
                           "programs at the egress proxy)"));
    CHECK(flags_error({"github=npm_config_https_proxy"}, "") != test::k_no_error);
}

TEST_CASE("a profile's secret forbid takes the host out of every binding and nothing lifts it", "[secret]") {
    test::TempDir state;
    save_secret(state.path, {"github", SecretSource::Value, "x", "", {}});
    const std::vector<SecretForbid> forbid{
        {"github", "github.com", "profile org (/org/org.yaml:9) spec.secrets.forbid[0]"}};
    std::vector<std::string> notices;
    // The catalog's two hosts: github.com is taken out, api.github.com stays.
    auto uses = secret_uses(state.path, flags_of({"github"}), forbid, "", true, &notices);
    REQUIRE(uses.size() == 1);
    CHECK(uses[0].hosts == std::vector<SecretHost>{{"api.github.com", "authorization"}});
    CHECK(notices == std::vector<std::string>{"secret github is not injected into github.com: profile org "
                                              "(/org/org.yaml:9) spec.secrets.forbid[0] forbids it"});
    // A later binding naming the forbidden host itself does not lift the forbid.
    SecretBinding later{
        "github", "", {{"GitHub.com", "authorization"}}, "profile mine (/u/mine.yaml:4) spec.secrets.bind[0]"};
    CHECK(test::error_and_hint_of([&] { (void)secret_uses(state.path, {later}, forbid, "", true); }) ==
          "profile mine (/u/mine.yaml:4) spec.secrets.bind[0]: secret github has no host left to go to (profile org "
          "(/org/org.yaml:9) spec.secrets.forbid[0] forbids it on GitHub.com)\nhint: a forbid cannot be lifted by a "
          "later profile or a flag: bind the secret to another host, or leave it out");
    // "*" forbids every secret on the host.
    const std::vector<SecretForbid> all{{"*", "api.github.com", "x"}, {"*", "github.com", "y"}};
    CHECK(test::error_and_hint_of([&] { (void)secret_uses(state.path, flags_of({"github"}), all, "", true); }) !=
          test::k_no_error);
}
