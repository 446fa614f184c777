// The probe battery agentctl makes itself inside another network namespace:
// a child process in a namespace of its own (loopback only, a listener on
// 127.0.0.1:443) stands for a container. The probes need root (unshare,
// setns); without it only the refusals are checked.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "agentctl/error.hpp"
#include "provider/incus/network/netns_probes.hpp"
#include "support/net_namespace.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;
using agentctl::test::NamespaceChild;
using provider::common::ProbeVerdict;

namespace {

const provider::common::ProbeResult& result(const std::vector<provider::common::ProbeResult>& results,
                                            const std::string& name) {
    for (const auto& r : results) {
        if (r.name == name) return r;
    }
    FAIL("no result for " << name);
    return results.front();
}

}  // namespace

TEST_CASE("this process's own namespace is refused: a probe from here proves nothing", "[incus][netns]") {
    // Opening and comparing a namespace needs no privilege: this runs for every user.
    CHECK_THROWS_WITH(NetnsHandle(static_cast<int>(::getpid())),
                      Catch::Contains("runs in this host's own network namespace"));
    CHECK_THROWS_WITH(NetnsHandle(0), Catch::Contains("no init process"));
}

TEST_CASE("the probes run in the sandbox's namespace, with agentctl's own sockets", "[incus][netns]") {
    if (::geteuid() != 0) return;  // setns needs root
    NamespaceChild child(443);
    const NetnsHandle netns(child.pid());
    ProbeTargets targets;
    targets.unrouted = "127.0.0.1";  // inside the child's namespace, a listener answers there
    targets.gateway = "127.0.0.2";   // nothing listens: every probe of it is refused at once
    targets.gateway_canary = 9;
    targets.proxy_port = 3128;
    const auto results = probe_in_namespace(netns, targets, std::chrono::milliseconds(500));
    REQUIRE(results.size() == probe_names().size());
    for (std::size_t i = 0; i < results.size(); ++i) CHECK(results[i].name == probe_names()[i]);
    // The connection was made in the child's namespace: only there does 127.0.0.1:443 accept.
    CHECK(result(results, "direct-bypass").verdict == ProbeVerdict::Escaped);
    CHECK_THAT(result(results, "direct-bypass").detail, Catch::Contains("127.0.0.1:443 (no proxy) connected"));
    CHECK(result(results, "host-port").verdict == ProbeVerdict::Held);
    CHECK_THAT(result(results, "host-port").detail, Catch::Contains("was rejected (Connection refused)"));
    CHECK(result(results, "host-address").verdict == ProbeVerdict::Held);  // no other address to try
    CHECK(result(results, "dns-udp-elsewhere").verdict == ProbeVerdict::Held);
    // No proxy and no resolver answer there: not verified, never "held".
    CHECK(result(results, "proxy-denied-name").verdict == ProbeVerdict::Inconclusive);
    CHECK(result(results, "dns-denied-name").verdict == ProbeVerdict::Inconclusive);
    targets.dns_closed = true;  // network.dns.disabled: a refused resolver is what must happen
    CHECK(result(probe_in_namespace(netns, targets, std::chrono::milliseconds(500)), "dns-denied-name").verdict ==
          ProbeVerdict::Held);
}
