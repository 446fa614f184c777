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
