// --preview: the provider prints each API call as a runnable `incus query` line
// (and the `incus exec` line for interactive ones) and changes nothing. The
// lines come from the same code as the real calls: only the client differs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <regex>
#include <sstream>

#include "provider/incus/network/acl_rules.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/lifecycle/incus_provider.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "support/provider_context.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

struct Fixture : test::ProviderContextFixture<> {
    Fixture() : ProviderContextFixture({.preview = true}) {}
    std::unique_ptr<Provider> provider = make_provider(context, make_preview_client(out), nullptr);
};

}  // namespace

TEST_CASE("preview create prints the ACL, the bridge and the instance calls", "[preview]") {
    Fixture f;
    SandboxSpec spec;
    spec.name = "itest-preview";
    spec.image = "agentctl-debian-12";
    spec.isolation = Isolation::Container;
    spec.network.allow.push_back(policy::parse_allow_entry("api.example.com:443", "--allow"));
    spec.network.allow.push_back(policy::parse_allow_entry("93.184.216.34:443", "--allow"));
    f.provider->lifecycle().create(spec);
    const auto text = f.out.str();
    CHECK_THAT(text, Catch::Contains("incus query -X GET /1.0\n"));
    CHECK_THAT(
        text, Catch::Contains("incus query -X POST --data '{\"config\":{\"user.agentctl.sandbox\":\"itest-preview\"}"));
    CHECK_THAT(text, Catch::Contains("\"destination\":\"93.184.216.34/32\",\"destination_port\":\"443\""));
    CHECK_THAT(text, Catch::Contains("\"destination_port\":\"3128\""));  // the egress proxy
    // The sandbox's resolver: agentctl's dnsmasq, its allowlist on the command line. Its
    // address is the first subnet of the pool that no bridge on this host holds.
    const auto resolver = std::find_if(f.reporter.lines.begin(), f.reporter.lines.end(), [](const std::string& line) {
        return line.starts_with("step: would start the resolver of itest-preview on 10.213.") &&
               line.find(":53 as uid 2000000000: dnsmasq ") != std::string::npos;
    });
    REQUIRE(resolver != f.reporter.lines.end());
    // Its host processes' uid, the first of agentctl's range, recorded on the bridge and the instance.
    CHECK_THAT(text, Catch::Contains("\"user.agentctl.host.uid\":\"2000000000\""));
    CHECK_THAT(*resolver, Catch::Contains(" --server=/api.example.com/"));
    CHECK_THAT(*resolver, Catch::EndsWith(" '--address=/#/'"));  // quoted: runnable as printed
    CHECK_THAT(text, Catch::Contains("\"dns.mode\":\"none\""));  // Incus's own resolver is off
    CHECK_THAT(text, Catch::Contains("\"environment.https_proxy\":\"http://"));
    CHECK_THAT(text, Catch::Contains("\"security.ipv4_filtering\":\"true\""));
    CHECK_THAT(text, Catch::Contains("\"security.mac_filtering\":\"true\""));
    CHECK_THAT(text, Catch::Contains("/1.0/network-acls\n"));
    CHECK_THAT(text, Catch::Contains("\"name\":\"" + bridge_name("itest-preview") + "\""));
    CHECK_THAT(text, Catch::Contains("/1.0/networks\n"));
    CHECK_THAT(text, Catch::Contains("\"type\":\"container\""));
    CHECK_THAT(text, Catch::Contains("/1.0/instances\n"));
    CHECK_THAT(text, Catch::Contains("/1.0/instances/itest-preview/exec\n"));  // the user bootstrap
    // Every line is a runnable incus command.
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) CHECK_THAT(line, Catch::StartsWith("incus query "));
}

TEST_CASE("preview shell prints the incus exec line with the user flags", "[preview]") {
    Fixture f;
    CHECK(f.provider->commands()->shell("itest-preview", false) == 0);
    CHECK_THAT(f.out.str(), Catch::Contains("incus exec itest-preview --user 1500 --group 1500 --cwd /home/agent "
                                            "--env HOME=/home/agent --env LANG=C.UTF-8 --env LOGNAME=agent "
                                            "--env NPM_CONFIG_PREFIX=/home/agent/.npm-global "
                                            "--env PATH=/home/agent/.local/bin:/home/agent/.npm-global/bin:"));
    CHECK_THAT(f.out.str(), Catch::EndsWith("--env USER=agent -- /bin/bash -l\n"));
    std::ostringstream().swap(f.out);
    f.provider->commands()->shell("itest-preview", true);
    CHECK_THAT(f.out.str(), Catch::Contains("incus exec itest-preview --env HOME=/root"));
    CHECK_THAT(f.out.str(), Catch::EndsWith("--env USER=root -- /bin/bash -l\n"));
}

TEST_CASE("preview exec -t and delete", "[preview]") {
    Fixture f;
    ExecRequest request;
    request.argv = {"bash", "-c", "echo hi"};
    request.tty = true;
    CHECK(f.provider->commands()->exec("itest-preview", request) == 0);
    CHECK_THAT(f.out.str(), Catch::Contains("\nincus exec itest-preview -t --user 1500"));
    CHECK_THAT(f.out.str(), Catch::EndsWith("-- bash -c 'echo hi'\n"));
    // Without -t: the exec API with websockets, output streamed, nothing recorded.
    std::ostringstream().swap(f.out);
    request.tty = false;
    CHECK(f.provider->commands()->exec("itest-preview", request) == 0);
    CHECK_THAT(f.out.str(), Catch::Contains("\"record-output\":false"));
    CHECK_THAT(f.out.str(), Catch::Contains("\"wait-for-websocket\":true"));
    CHECK_THAT(f.out.str(), Catch::Contains("/1.0/instances/itest-preview/exec\n"));
    // -e and -w: in the request (and on the incus client's line with -t).
    std::ostringstream().swap(f.out);
    request.env = {{"GREETING", "hi there"}};
    request.cwd = "/workspace";
    CHECK(f.provider->commands()->exec("itest-preview", request) == 0);
    CHECK_THAT(f.out.str(), Catch::Contains("\"GREETING\":\"hi there\""));
    CHECK_THAT(f.out.str(), Catch::Contains("\"cwd\":\"/workspace\""));
    std::ostringstream().swap(f.out);
    request.tty = true;
    CHECK(f.provider->commands()->exec("itest-preview", request) == 0);
    CHECK_THAT(f.out.str(), Catch::Contains("--cwd /workspace"));
    CHECK_THAT(f.out.str(), Catch::Contains("--env 'GREETING=hi there'"));
    std::ostringstream().swap(f.out);
    f.provider->lifecycle().remove("itest-preview", true);
    CHECK_THAT(f.out.str(), Catch::Contains("incus query -X DELETE /1.0/instances/itest-preview\n"));
}

TEST_CASE("capabilities: everything but exec logs is supported", "[preview]") {
    auto platform = make_real_host_platform();
    auto matrix = capabilities(*platform);
    for (auto feature : k_features) {
        const bool logs = std::string_view(feature) == "logs.exec";
        CHECK(matrix.get(feature).status == (logs ? CapabilityStatus::UnderDevelopment : CapabilityStatus::Supported));
    }
}

TEST_CASE("preview create with the proxy in an instance prints the companion and the sourced rules", "[preview]") {
    test::ProviderContextFixture<> f({.preview = true, .settings = {{"incus.proxyPlacement", "instance"}}});
    auto [out, context, reporter] = std::tie(f.out, f.context, f.reporter);
    auto provider = make_provider(context, make_preview_client(out), nullptr);
    SandboxSpec spec;
    spec.name = "itest-preview";
    spec.image = "agentctl-debian-12";
    spec.isolation = Isolation::Container;
    spec.network.allow.push_back(policy::parse_allow_entry("api.example.com:443", "--allow"));
    provider->lifecycle().create(spec);
    const auto text = out.str();
    // The companion: its own container on the sandbox's bridge, marked as the sandbox's proxy.
    CHECK_THAT(text, Catch::Contains("\"name\":\"itest-preview-egress\""));
    CHECK_THAT(text, Catch::Contains("\"user.agentctl.role\":\"egress-proxy\""));
    CHECK_THAT(text, Catch::Contains("\"description\":\"agentctl egress proxy of sandbox itest-preview\""));
    // The ACL's rules name their source; the sandbox's proxy settings point at the companion.
    CHECK_THAT(text, Catch::Contains("\"action\":\"reject\""));
    CHECK_THAT(text, Catch::Contains("\"source\":\""));
    // The companion's address (the subnet's third host, in the first free subnet of the pool).
    std::smatch companion;
    REQUIRE(std::regex_search(text, companion,
                              std::regex("\"destination\":\"([0-9.]+\\.)([0-9]+)/32\",\"destination_port\":\"3128\"")));
    CHECK(std::stoi(companion[2]) % 16 == 3);
    CHECK_THAT(text, Catch::Contains("\"environment.https_proxy\":\"http://" + companion[1].str() + companion[2].str() +
                                     ":3128\""));
    CHECK(std::find(reporter.lines.begin(), reporter.lines.end(),
                    "step: would write the egress policy of itest-preview into itest-preview-egress") !=
          reporter.lines.end());
    bool push = false;
    for (const auto& line : reporter.lines) push = push || line.starts_with("step: would push agentctl's binary");
    CHECK(push);
    // The companion is created before the sandbox (no moment without its proxy's address taken).
    CHECK(text.find("\"name\":\"itest-preview-egress\"") < text.find("\"name\":\"itest-preview\""));
}
