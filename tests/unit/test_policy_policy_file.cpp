// The egress proxy's policy file: round trip, extra fields, malformed input.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"
#include "support/error_text.hpp"

using namespace agentctl;
using namespace agentctl::policy;
using nlohmann::json;

namespace {

std::string error_of(const json& document) {
    return test::error_of([&] { (void)from_policy_file(document); });
}

json valid() {
    return json::parse(R"({"version":1,"enabled":true,"denyLAN":true,"allowLAN":false,
        "allow":[{"domain":"*.example.com","ports":[443],"origin":"--allow"}],"dns":{"servers":[],"disabled":false}})");
}

}  // namespace

TEST_CASE("a policy survives the round trip through its file", "[policy-file]") {
    NetworkPolicy policy;
    policy.deny_lan = false;
    policy.allow_lan = true;
    policy.allow.push_back(parse_allow_entry("*.example.com:80,443", "preset x"));
    policy.allow.push_back(parse_allow_entry("[2606:4700::1111]:443", "--allow"));
    policy.allow.push_back(parse_allow_entry("93.184.216.34", "allow file a.txt:3"));
    policy.allow.push_back(parse_allow_entry("api.example.com", "agent claude"));
    policy.dns.servers = {"192.0.2.53"};
    policy.dns.disabled = true;
    auto document = to_policy_file(policy);
    CHECK(document.dump() ==
          R"({"allow":[{"domain":"*.example.com","origin":"preset x","ports":[80,443]},)"
          R"({"domain":"2606:4700::1111","origin":"--allow","ports":[443]},)"
          R"({"domain":"93.184.216.34","origin":"allow file a.txt:3","ports":[]},)"
          R"({"domain":"api.example.com","origin":"agent claude","ports":[]}],"allowLAN":true,"denyLAN":false,)"
          R"("dns":{"disabled":true,"servers":["192.0.2.53"]},"enabled":true,"version":1})");
    auto back = from_policy_file(json::parse(document.dump()));
    CHECK(back.enabled == policy.enabled);
    CHECK(back.deny_lan == policy.deny_lan);
    CHECK(back.allow_lan == policy.allow_lan);
    CHECK(back.allow == policy.allow);
    CHECK(back.dns.servers == policy.dns.servers);
    CHECK(back.dns.disabled == policy.dns.disabled);
}

TEST_CASE("the policy file's text reads back as the policy and ends in a newline", "[policy-file]") {
    NetworkPolicy policy;
    policy.allow.push_back(parse_allow_entry("*.example.com:443", "--allow"));
    policy.dns.servers = {"192.0.2.53"};
    policy.budgets.push_back({"example.com", 443, 1024});
    policy.default_budget = 4096;
    const auto text = policy_file_text(policy);
    REQUIRE_FALSE(text.empty());
    CHECK(text.back() == '\n');
    CHECK(text == to_policy_file(policy).dump(2) + "\n");
    auto back = from_policy_file_text(text);
    CHECK(to_policy_file(back) == to_policy_file(policy));
    CHECK(back.allow == policy.allow);
}

TEST_CASE("policy file text that is not JSON is malformed", "[policy-file]") {
    CHECK(test::error_of([] { (void)from_policy_file_text("{\"version\":1,"); }) ==
          "malformed policy file: field (document): is not valid JSON");
}

TEST_CASE("extra fields in a policy file are allowed", "[policy-file]") {
    auto document = valid();
    document["generatedBy"] = "agentctl 0.1";
    document["allow"][0]["comment"] = "x";
    auto policy = from_policy_file(document);
    REQUIRE(policy.allow.size() == 1);
    CHECK(policy.allow[0].entry() == "*.example.com:443");
    CHECK(policy.allow[0].origin == "--allow");
}

TEST_CASE("a malformed policy file is an error naming the field", "[policy-file]") {
    CHECK(error_of(json::array()) == "malformed policy file: field (document): must be a JSON object");
    auto d = valid();
    d["version"] = 2;
    CHECK(error_of(d) == "malformed policy file: field version: must be 1");
    d = valid();
    d.erase("denyLAN");
    CHECK(error_of(d) == "malformed policy file: field denyLAN: missing");
    d = valid();
    d["enabled"] = "yes";
    CHECK(error_of(d) == "malformed policy file: field enabled: must be true or false");
    d = valid();
    d["allow"] = json::object();
    CHECK(error_of(d) == "malformed policy file: field allow: must be an array");
    d = valid();
    d["allow"][0]["ports"][0] = 70000;
    CHECK(error_of(d) == "malformed policy file: field allow[0].ports[0]: must be in 1-65535");
    d = valid();
    d["allow"][0]["ports"][0] = "443";
    CHECK(error_of(d) == "malformed policy file: field allow[0].ports[0]: must be an integer");
    d = valid();
    d["allow"][0]["domain"] = "example.com:443";
    CHECK(error_of(d) == "malformed policy file: field allow[0].domain: must not carry a port; ports go in \"ports\"");
    d = valid();
    d["allow"][0]["domain"] = "exa mple.com";
    CHECK(
        error_of(d) ==
        "malformed policy file: field allow[0].domain: invalid allow entry \"exa mple.com\": it contains a space or a "
        "control character");
    d = valid();
    d["allow"][0].erase("ports");
    CHECK(error_of(d) == "malformed policy file: field allow[0].ports: missing");
    d = valid();
    d["dns"]["servers"] = json::array({"dns.example"});
    CHECK(error_of(d) == "malformed policy file: field dns.servers[0]: must be an IP address");
}
