// `agentctl policy propose`: after a run that tried five hosts (two allowed,
// three refused) and a LAN address, the proposed profile, applied, lets
// exactly those five through, and nothing else.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <sstream>
#include <string>

#include "agentctl/provider.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "policy/profile.hpp"
#include "suite_support.hpp"

using namespace std::chrono_literals;

TEST_CASE("policy propose after a run that tried five hosts gives a profile that lets exactly those through") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 a.test b.test c.test d.test e.test f.test\n");
    files.write_policy(suite::policy_allowing({"a.test:7", "b.test:7"}));
    const std::vector<std::string> tried{"a.test:7", "b.test:7", "c.test:7", "d.test:7", "e.test:7"};
    {
        suite::Proxy proxy(files);
        for (const auto& destination : tried) {
            suite::Client client(proxy.port);
            const auto status = suite::connect_through(client, destination).status;
            CHECK(status == (destination < "c" ? 200 : 403));
            if (status == 200) CHECK(suite::echo_on(client, "used"));
        }
        suite::Client lan(proxy.port);
        CHECK(suite::connect_through(lan, std::string(suite::Network::k_lan_origin) + ":80").status == 403);
        // Stopping the proxy writes out every line of its log: the run is over.
        proxy.process().signal(SIGTERM);
        REQUIRE(proxy.process().wait_exit(5s) == 0);
    }

    agentctl::LogRequest request;
    request.proposal = agentctl::LogRequest::Proposal::Profile;
    request.sandbox = "proposal-test";
    std::ostringstream text;
    REQUIRE(agentctl::egress_proxy::print_network_log(files.log.string(), request, text) == 0);
    INFO(text.str());
    const auto profile = agentctl::policy::parse_profile(text.str(), (files.dir / "proposal-test.yaml").string(),
                                                         agentctl::policy::ProfileSource::File, {});
    std::vector<std::string> proposed;
    for (const auto& rule : profile.spec.allow) proposed.push_back(rule.entry());
    CHECK(proposed == tried);
    CHECK(text.str().find("# not proposed: 10.231.0.2:80 refused (lan 1)") != std::string::npos);

    // Applied, it lets exactly those through.
    agentctl::policy::NetworkPolicy applied;
    applied.allow = profile.spec.allow;
    files.write_policy(applied);
    suite::Proxy proxy(files);
    for (const auto& destination : tried) {
        INFO(destination);
        suite::Client client(proxy.port);
        CHECK(suite::connect_through(client, destination).status == 200);
        CHECK(suite::echo_on(client, "allowed by the proposal"));
    }
    suite::Client other(proxy.port);
    CHECK(suite::connect_through(other, "f.test:7").status == 403);
    suite::Client lan(proxy.port);
    CHECK(suite::connect_through(lan, std::string(suite::Network::k_lan_origin) + ":80").status == 403);
}
