#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "agentctl/error.hpp"
#include "egress_proxy/secret_injection.hpp"
#include "policy/secret_store.hpp"
#include "provider/common/sandbox_secrets.hpp"
#include "support/recording_runner.hpp"
#include "support/temp_dir.hpp"

using namespace agentctl;
using namespace agentctl::provider::common;

TEST_CASE("each sandbox secret gets a placeholder of its own, recorded 0600 without its value", "[secrets]") {
    test::TempDir dir;
    auto planned =
        plan_sandbox_secrets({{"github", "GH_TOKEN", {{"api.github.com", "authorization"}}, "--secret github"},
                              {"anthropic", "ANTHROPIC_API_KEY", {}, "agent claude"}});
    REQUIRE(planned.size() == 2);
    CHECK(planned[0].placeholder.starts_with("agentctl-secret-github-"));
    CHECK(planned[0].placeholder.size() == std::string("agentctl-secret-github-").size() + 32);
    CHECK(planned[0].placeholder != plan_sandbox_secrets({{"github", "GH_TOKEN", {}, ""}})[0].placeholder);
    write_sandbox_secrets(dir.path, planned);
    struct stat st {};
    REQUIRE(::stat((dir.path / "secrets.json").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    auto read = read_sandbox_secrets(dir.path);
    REQUIRE(read.size() == 2);
    CHECK(read[1].placeholder == planned[1].placeholder);
    // The binding is recorded with it: hosts (the forbids applied at create) and origin, never a value.
    CHECK(read[0].hosts == std::vector<SecretHost>{{"api.github.com", "authorization"}});
    CHECK(read[0].origin == "--secret github");

    auto env = secret_environment(read);
    CHECK(env.at("GH_TOKEN") == planned[0].placeholder);
    CHECK(env.at("NODE_EXTRA_CA_CERTS") == agentctl::policy::k_sandbox_ca_file);
    CHECK(env.at("SSL_CERT_FILE") == "/etc/ssl/certs/ca-certificates.crt");
    CHECK(env.at("REQUESTS_CA_BUNDLE") == "/etc/ssl/certs/ca-certificates.crt");
    CHECK(secret_environment({}).empty());
}

TEST_CASE("the proxy's payload holds the CA, each placeholder, its value now and its hosts", "[secrets]") {
    test::TempDir state;
    const auto sandbox_dir = state.path / "incus" / "box";
    policy::save_secret(state.path, {"github", policy::SecretSource::Command, "", "gh auth token", {}});
    write_sandbox_secrets(sandbox_dir, {{"github", "GH_TOKEN", "agentctl-secret-github-00", {}, ""}});
    test::RecordingProcessRunner runner;
    ProcessResult token;
    token.out = "gho_fresh\n";
    runner.expect(token);
    auto payload = egress_proxy::parse_secret_payload(proxy_secret_payload(state.path, sandbox_dir, "box", runner));
    CHECK(payload.ca_cert_pem.find("BEGIN CERTIFICATE") != std::string::npos);
    CHECK(payload.ca_key_pem.find("PRIVATE KEY") != std::string::npos);
    REQUIRE(payload.secrets.size() == 1);
    CHECK(payload.secrets[0].value == "gho_fresh");  // the command ran at this start
    CHECK(payload.secrets[0].placeholder == "agentctl-secret-github-00");
    REQUIRE(payload.secrets[0].bindings.size() == 2);
    CHECK(payload.secrets[0].bindings[1].host == "github.com");
    struct stat st {};
    REQUIRE(::stat((sandbox_dir / "egress-ca.key").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);

    // Recorded hosts win over the secret's own: the forbids applied at create stay applied.
    write_sandbox_secrets(
        sandbox_dir, {{"github", "GH_TOKEN", "agentctl-secret-github-00", {{"api.github.com", "authorization"}}, ""}});
    runner.expect(token);
    payload = egress_proxy::parse_secret_payload(proxy_secret_payload(state.path, sandbox_dir, "box", runner));
    CHECK(payload.secrets[0].bindings == std::vector<SecretHost>{{"api.github.com", "authorization"}});

    policy::remove_secret(state.path, "github");
    CHECK_THROWS_WITH(proxy_secret_payload(state.path, sandbox_dir, "box", runner),
                      "sandbox box uses secret github, which is no longer stored");
    CHECK(proxy_secret_payload(state.path, state.path / "incus" / "other", "other", runner).empty());
}
