// agentctl/sandbox.hpp: the warnings create and status give for each default a
// sandbox's settings loosen.
#include <catch2/catch.hpp>

#include <string>

#include "agentctl/policy.hpp"
#include "agentctl/sandbox.hpp"

using agentctl::SandboxSpec;
using agentctl::widenings;
using agentctl::policy::AllowRule;
using agentctl::policy::HostKind;

TEST_CASE("a default upload budget warns about each address it cannot count") {
    SandboxSpec spec;
    spec.network.allow.push_back(
        AllowRule{.kind = HostKind::Name, .host = "api.example.com", .ports = {443}, .origin = "test", .expires = 0});
    spec.network.allow.push_back(
        AllowRule{.kind = HostKind::Ip, .host = "10.0.0.5", .ports = {22}, .origin = "test", .expires = 0});
    CHECK(widenings(spec).empty());  // no default budget: nothing promised about the address
    spec.network.default_budget = 1024;
    const auto out = widenings(spec);
    REQUIRE(out.size() == 1);
    CHECK(out.front() ==
          "upload not counted: 10.0.0.5 is an address, which the firewall admits without the proxy, so the "
          "default upload budget does not cap it");
    spec.network.enabled = false;  // nothing is counted then, and that has its own warning
    CHECK(widenings(spec).size() == 1);
    CHECK(widenings(spec).front().starts_with("no network policy"));
}
