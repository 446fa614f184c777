// `policy check`: the destination through pre_decide()/decide(), per-address
// verdicts, renderings and exit codes; the real resolver on /etc/hosts names.
#include <catch2/catch.hpp>

#include <map>

#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "policy/check.hpp"
#include "support/fake_resolver.hpp"

using namespace agentctl;
using namespace agentctl::policy;

namespace {

NetworkPolicy policy_of(std::initializer_list<const char*> entries) {
    NetworkPolicy policy;
    for (const char* e : entries) policy.allow.push_back(parse_allow_entry(e, "profile team (/o/team.yaml:8)"));
    return policy;
}

// Routes by address text: HostLocal or SandboxNetwork for the listed ones, Away otherwise.
class FakeRoutes final : public RouteTable {
public:
    std::map<std::string, RouteKind> kinds;
    Route route_to(const IpAddress& address) override {
        auto it = kinds.find(address.to_string());
        return Route{it == kinds.end() ? RouteKind::Away : it->second, it == kinds.end() ? "" : "agc-test"};
    }
};

}  // namespace

TEST_CASE("with the kernel's routes, policy check refuses what the proxy would refuse when dialling", "[check]") {
    test::FakeResolver resolver;
    resolver.table["api.example.com"] = {"93.184.216.34", "93.184.216.35"};
    FakeRoutes routes;
    routes.kinds["93.184.216.34"] = RouteKind::HostLocal;  // an address the host gained
    auto next = check_destination(policy_of({"api.example.com:443"}), "api.example.com", resolver, {}, &routes);
    CHECK(next.allowed);
    REQUIRE(next.address.has_value());
    CHECK(next.address->to_string() == "93.184.216.35");  // the proxy dials the next one
    REQUIRE(next.addresses.size() == 2);
    CHECK_FALSE(next.addresses[0].allowed);
    CHECK(next.addresses[0].reason == Reason::HostAddress);

    routes.kinds["93.184.216.35"] = RouteKind::SandboxNetwork;
    auto none = check_destination(policy_of({"api.example.com:443"}), "api.example.com", resolver, {}, &routes);
    CHECK_FALSE(none.allowed);
    CHECK(none.reason == Reason::HostAddress);  // the first refusal by a route

    NetworkPolicy lan = policy_of({});
    lan.allow_lan = true;
    lan.deny_lan = false;
    routes.kinds["10.213.0.18"] = RouteKind::SandboxNetwork;
    auto sandbox = check_destination(lan, "10.213.0.18:22", resolver, {}, &routes);
    CHECK_FALSE(sandbox.allowed);
    CHECK(sandbox.reason == Reason::SandboxNetwork);
    // Without the routes: the policy's word only, as before.
    CHECK(check_destination(lan, "10.213.0.18:22", resolver, {}).allowed);
}

TEST_CASE("an allowed destination names the rule, its origin and the address dialled", "[check]") {
    test::FakeResolver resolver;
    resolver.table["api.example.com"] = {"10.0.0.8", "93.184.216.34"};
    auto result = check_destination(policy_of({"*.example.com:443"}), "API.example.com", resolver, {});
    CHECK(result.allowed);
    CHECK(result.reason == Reason::Allowlisted);
    CHECK(result.port == 443);
    CHECK(result.resolved);
    CHECK(resolver.asked == std::vector<std::string>{"api.example.com"});
    REQUIRE(result.addresses.size() == 2);
    CHECK_FALSE(result.addresses[0].allowed);
    CHECK(result.addresses[0].reason == Reason::Lan);
    CHECK(result.addresses[1].allowed);
    CHECK(render_check_table(result) ==
          "Destination: API.example.com:443\n"
          "Verdict:     allowed (allowlisted)\n"
          "Why:         api.example.com port 443 is allowed by *.example.com:443 (from profile team (/o/team.yaml:8))\n"
          "Rule:        *.example.com:443 (from profile team (/o/team.yaml:8))\n"
          "Dial:        93.184.216.34\n"
          "\n"
          "ADDRESS        VERDICT  REASON\n"
          "10.0.0.8       refused  lan\n"
          "93.184.216.34  allowed  allowlisted\n");
    auto json = check_to_json(result);
    CHECK(
        json.dump() ==
        R"J({"address":"93.184.216.34","addresses":[{"address":"10.0.0.8","allowed":false,"detail":"10.0.0.8 is a LAN address and deny-LAN is on","reason":"lan"},)J"
        R"J({"address":"93.184.216.34","allowed":true,"detail":"api.example.com port 443 is allowed by *.example.com:443 (from profile team (/o/team.yaml:8))","reason":"allowlisted"}],)J"
        R"J("allowed":true,"detail":"api.example.com port 443 is allowed by *.example.com:443 (from profile team (/o/team.yaml:8))",)J"
        R"J("enforced_by":"","host":"API.example.com",)J"
        R"J("matching_rules":[{"entry":"*.example.com:443","origin":"profile team (/o/team.yaml:8)"}],)J"
        R"J("port":443,"reason":"allowlisted","rule":{"entry":"*.example.com:443","origin":"profile team (/o/team.yaml:8)"},)J"
        R"J("unresolved":false})J");
    CHECK(check_exit_code(result) == 0);
}

TEST_CASE("a refusal before any lookup does not resolve", "[check]") {
    test::FakeResolver resolver;
    auto result = check_destination(policy_of({"api.example.com:443"}), "evil.example.net:443", resolver, {});
    CHECK_FALSE(result.allowed);
    CHECK(result.reason == Reason::NotAllowlisted);
    CHECK(resolver.asked.empty());
    CHECK(check_exit_code(result) == exit_code::k_policy_refused);
    CHECK(render_check_table(result) ==
          "Destination: evil.example.net:443\nVerdict:     refused (not-allowlisted)\nWhy:         no allow rule names "
          "evil.example.net\n");
    auto port = check_destination(policy_of({"api.example.com:443"}), "http://api.example.com", resolver, {});
    CHECK(port.reason == Reason::PortNotAllowed);
    CHECK(port.port == 80);
    REQUIRE(port.rule.has_value());
    CHECK(port.rule->entry() == "api.example.com:443");
}

TEST_CASE("a bare IP destination is judged as that address", "[check]") {
    test::FakeResolver resolver;
    auto result = check_destination(policy_of({"93.184.216.34:443"}), "1572395042:443", resolver, {});
    CHECK(result.allowed);
    CHECK(resolver.asked.empty());
    REQUIRE(result.addresses.size() == 1);
    CHECK(result.addresses[0].address.to_string() == "93.184.216.34");
    auto loop = check_destination(policy_of({}), "[::ffff:127.0.0.1]:22", resolver, {});
    CHECK(loop.reason == Reason::Loopback);
    CHECK(loop.port == 22);
}

TEST_CASE("a name that does not resolve, and a disabled policy", "[check]") {
    test::FakeResolver resolver;
    auto result = check_destination(policy_of({"gone.example.com"}), "gone.example.com", resolver, {});
    CHECK(result.reason == Reason::NoAddress);
    CHECK(result.unresolved);
    CHECK(check_exit_code(result) == exit_code::k_policy_unresolved);
    CHECK(render_check_table(result).starts_with(
        "Destination: gone.example.com:443\n"
        "Verdict:     allowed by the policy, but the name does not resolve now (no-address)\n"));
    CHECK(render_check_table(result).ends_with("\n(the name did not resolve)\n"));
    CHECK(check_to_json(result)["unresolved"] == true);
    // A name the policy refuses is a refusal whether or not it resolves.
    auto refused = check_destination(policy_of({"gone.example.com"}), "other.example.com", resolver, {});
    CHECK_FALSE(refused.unresolved);
    CHECK(check_exit_code(refused) == exit_code::k_policy_refused);
    NetworkPolicy disabled;
    disabled.enabled = false;
    resolver.table["any.example"] = {"93.184.216.34"};
    auto open = check_destination(disabled, "any.example:25", resolver, {});
    CHECK(open.allowed);
    CHECK(open.reason == Reason::PolicyDisabled);
}

TEST_CASE("every rule naming the host is shown with its origin; IPv6 in brackets", "[check]") {
    test::FakeResolver resolver;
    resolver.table["api.example.com"] = {"93.184.216.34"};
    NetworkPolicy policy;
    policy.allow.push_back(parse_allow_entry("api.example.com:22", "allow file /p/hosts.txt:4"));
    policy.allow.push_back(parse_allow_entry("*.example.com:443", "preset team"));
    policy.allow.push_back(parse_allow_entry("other.example.org", "--allow"));
    auto result = check_destination(policy, "api.example.com:443", resolver, {});
    CHECK(result.allowed);
    REQUIRE(result.matching_rules.size() == 2);
    result.enforced_by = "incus: an ACL";
    auto table = render_check_table(result);
    CHECK(table.find("Rule:        *.example.com:443 (from preset team)\n"
                     "Also names:  api.example.com:22 (from allow file /p/hosts.txt:4)\n"
                     "Dial:        93.184.216.34\n"
                     "Enforced by: incus: an ACL\n") != std::string::npos);

    NetworkPolicy v6;
    v6.allow.push_back(parse_allow_entry("[2606:4700::1111]:443", "--allow"));
    auto bracketed = check_destination(v6, "[2606:4700::1111]:443", resolver, {});
    CHECK(bracketed.allowed);
    CHECK(render_check_table(bracketed).starts_with("Destination: [2606:4700::1111]:443\n"));
}

TEST_CASE("this host's own addresses are refused", "[check]") {
    test::FakeResolver resolver;
    resolver.table["me.example.com"] = {"93.184.216.34"};
    auto own = std::vector<IpAddress>{*parse_ip_literal("93.184.216.34")};
    auto result = check_destination(policy_of({"me.example.com"}), "me.example.com", resolver, own);
    CHECK(result.reason == Reason::HostAddress);
}

TEST_CASE("destinations are parsed strictly", "[check]") {
    CHECK(parse_destination("example.com").port == 443);
    CHECK(parse_destination("example.com:8080").port == 8080);
    CHECK(parse_destination("[2606:4700::1111]:53").host == "2606:4700::1111");
    CHECK(parse_destination("2606:4700::1111").host == "2606:4700::1111");
    CHECK(parse_destination("https://example.com/").host == "example.com");
    CHECK_THROWS_WITH(parse_destination(""), "invalid destination \"\": it is empty");
    CHECK_THROWS_WITH(parse_destination("example.com:0"),
                      "invalid destination \"example.com:0\": port \"0\" is not a number from 1 to 65535");
    CHECK_THROWS_WITH(
        parse_destination("https://example.com/x"),
        "invalid destination \"https://example.com/x\": a path plays no part in the decision; give the host");
    CHECK_THROWS_WITH(parse_destination("ftp://example.com"),
                      "invalid destination \"ftp://example.com\": only http:// and https:// URLs are understood");
    CHECK_THROWS_WITH(parse_destination(":443"), "invalid destination \":443\": the host is empty");
}

TEST_CASE("the system resolver and interface list are real", "[check][system]") {
    auto resolver = make_system_resolver();
    auto addresses = resolver->resolve("localhost");  // from /etc/hosts, no network needed
    REQUIRE_FALSE(addresses.empty());
    for (const auto& address : addresses) CHECK(classify(address) == AddressClass::Loopback);
    CHECK(resolver->resolve("no-such-host.invalid").empty());
    auto own = host_own_addresses();
    bool has_loopback = false;
    for (const auto& address : own) has_loopback = has_loopback || address.to_string() == "127.0.0.1";
    CHECK(has_loopback);
    // end to end: a rule naming localhost still cannot reach the host
    NetworkPolicy policy;
    policy.allow.push_back(parse_allow_entry("localhost", "--allow"));
    auto result = check_destination(policy, "localhost:22", *resolver, own);
    CHECK_FALSE(result.allowed);
    CHECK(result.reason == Reason::Loopback);
}
