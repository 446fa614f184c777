#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "egress_proxy/secret_injection.hpp"

using namespace agentctl::egress_proxy;
namespace http = boost::beast::http;

namespace {

constexpr const char* k_placeholder = "agentctl-secret-placeholder-0123456789abcdef";

SecretTable table() {
    return SecretTable(
        {{"github", k_placeholder, "gho_REAL", {{"api.github.com", "authorization"}, {"github.com", "authorization"}}},
         {"anthropic",
          "agentctl-secret-placeholder-fedcba9876543210",
          "sk-ant-REAL",
          {{"api.anthropic.com", "x-api-key"}}}});
}

}  // namespace

TEST_CASE("a placeholder in its bound header to its bound host is replaced", "[secrets]") {
    http::fields fields;
    fields.insert("Host", "api.github.com");
    fields.insert("Authorization", std::string("token ") + k_placeholder);
    auto result = table().inject("API.github.com", "/user", fields);
    CHECK_FALSE(result.misplaced);
    CHECK(result.injected == std::vector<std::string>{"github"});
    CHECK(fields["Authorization"] == "token gho_REAL");
    CHECK(fields["Host"] == "api.github.com");
}

TEST_CASE("Basic credentials as git sends them are decoded, replaced and encoded again", "[secrets]") {
    http::fields fields;
    fields.insert("Authorization", "Basic " + encode_base64(std::string("x-access-token:") + k_placeholder));
    auto result = table().inject("github.com", "/o/r.git/info/refs", fields);
    CHECK(result.injected == std::vector<std::string>{"github"});
    CHECK(fields["Authorization"] == "Basic " + encode_base64("x-access-token:gho_REAL"));
}

TEST_CASE("a placeholder anywhere its secret does not go is named and nothing is replaced", "[secrets]") {
    const auto secrets = table();
    http::fields other_host;
    other_host.insert("Authorization", std::string("Bearer ") + k_placeholder);
    auto result = secrets.inject("gist.example.com", "/", other_host);
    REQUIRE(result.misplaced);
    CHECK(result.misplaced->secret == "github");
    CHECK(result.misplaced->where == "header authorization");
    CHECK(other_host["Authorization"] == std::string("Bearer ") + k_placeholder);

    http::fields other_header;
    other_header.insert("X-Api-Key", k_placeholder);
    CHECK(secrets.inject("api.github.com", "/", other_header).misplaced->where == "header x-api-key");

    http::fields basic_elsewhere;
    basic_elsewhere.insert("Authorization", "Basic " + encode_base64(std::string("u:") + k_placeholder));
    CHECK(secrets.inject("api.anthropic.com", "/", basic_elsewhere).misplaced->secret == "github");

    http::fields none;
    CHECK(secrets.inject("api.github.com", std::string("/?t=") + k_placeholder, none).misplaced->where == "the URL");
    // Plain HTTP (no host): never injected.
    http::fields plain;
    plain.insert("Authorization", std::string("Bearer ") + k_placeholder);
    CHECK(secrets.inject("", "/", plain).misplaced);
}

TEST_CASE("a request without a placeholder is left as it is", "[secrets]") {
    http::fields fields;
    fields.insert("Authorization", "Bearer mine");
    fields.insert("X-Other", "value");
    auto result = table().inject("api.github.com", "/", fields);
    CHECK(result.injected.empty());
    CHECK_FALSE(result.misplaced);
    CHECK(fields["Authorization"] == "Bearer mine");
    CHECK(table().binds("api.github.com", 443));
    CHECK_FALSE(table().binds("api.github.com", 80));
    CHECK_FALSE(table().binds("gist.github.com", 443));
}

TEST_CASE("the secret payload reads back and its errors name the field, never a value", "[secrets]") {
    SecretPayload payload{
        "CERT", "KEY", {{"github", k_placeholder, "gho_REAL", {{"API.github.com", "Authorization"}}}}};
    auto parsed = parse_secret_payload(secret_payload_json(payload));
    REQUIRE(parsed.secrets.size() == 1);
    CHECK(parsed.secrets[0].value == "gho_REAL");
    CHECK(parsed.secrets[0].bindings[0].host == "api.github.com");
    CHECK(parsed.secrets[0].bindings[0].header == "authorization");
    try {
        (void)parse_secret_payload(R"({"ca":{"cert":"C","key":"K"},"secrets":[{"name":"x","value":"v4lue"}]})");
        FAIL("expected an error");
    } catch (const agentctl::Error& e) {
        CHECK(std::string(e.what()) == "secret payload: field `secrets[0].placeholder` is missing or empty");
    }
}

TEST_CASE("a rotation takes the new value for the same name and placeholder, and nothing else", "[secrets]") {
    std::vector<std::string> changed;
    // Another placeholder or bindings in the update change nothing: only the value moves.
    auto rotated = table().with_values({{"github", k_placeholder, "gho_NEW", {{"evil.test", "authorization"}}},
                                        {"anthropic", "agentctl-secret-placeholder-other", "sk-ant-FORGED", {}}},
                                       changed);
    CHECK(changed == std::vector<std::string>{"github"});
    http::fields fields;
    fields.insert("Authorization", std::string("Bearer ") + k_placeholder);
    CHECK(rotated.inject("api.github.com", "/", fields).injected == std::vector<std::string>{"github"});
    CHECK(fields["Authorization"] == "Bearer gho_NEW");
    CHECK_FALSE(rotated.binds("evil.test", 443));
    http::fields key;
    key.insert("x-api-key", "agentctl-secret-placeholder-fedcba9876543210");
    (void)rotated.inject("api.anthropic.com", "/", key);
    CHECK(key["x-api-key"] == "sk-ant-REAL");
}

TEST_CASE("a placeholder in the start of a body is misplaced unless its secret is bound to the host", "[secrets]") {
    const auto secrets = table();
    const auto body = std::string(R"({"token":")") + k_placeholder + R"("})";
    const auto elsewhere = secrets.misplaced_in_body("api.anthropic.com", body);
    REQUIRE(elsewhere);
    CHECK(elsewhere->secret == "github");
    CHECK(elsewhere->where == "the body");
    CHECK(secrets.misplaced_in_body("", body)->secret == "github");  // plain HTTP
    // Its own host (any of its headers there): goes out as it is.
    CHECK_FALSE(secrets.misplaced_in_body("GitHub.com", body));
    CHECK_FALSE(secrets.misplaced_in_body("api.anthropic.com", "no placeholder here"));
    CHECK_FALSE(secrets.misplaced_in_body("api.anthropic.com", ""));
}
