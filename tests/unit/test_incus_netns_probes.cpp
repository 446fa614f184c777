// The probe battery agentctl makes itself inside another network namespace:
// a child process in a namespace of its own (loopback only, a listener on
// 127.0.0.1:443) stands for a container. The probes need root (unshare,
// setns); without it only the refusals are checked.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "agentctl/error.hpp"
#include "provider/incus/network/netns_probes.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;
using provider::common::ProbeVerdict;

namespace {

// A child in a new network namespace with loopback up and a listener on
// 127.0.0.1:PORT; it waits to be killed.
class NamespaceChild {
public:
    explicit NamespaceChild(std::uint16_t port) {
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        m_pid = ::fork();
        REQUIRE(m_pid >= 0);
        if (m_pid == 0) {
            char ok = 0;
            if (::unshare(CLONE_NEWNET) == 0) {
                const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
                ifreq ifr{};
                std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
                ifr.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
                const int l = ::socket(AF_INET, SOCK_STREAM, 0);
                sockaddr_in addr{};
                addr.sin_family = AF_INET;
                addr.sin_port = htons(port);
                addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                if (::ioctl(s, SIOCSIFFLAGS, &ifr) == 0 &&
                    ::bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(l, 8) == 0) {
                    ok = 1;
                }
            }
            (void)::write(ready[1], &ok, 1);
            for (;;) ::pause();
        }
        ::close(ready[1]);
        char ok = 0;
        REQUIRE(::read(ready[0], &ok, 1) == 1);
        ::close(ready[0]);
        REQUIRE(ok == 1);
    }
    ~NamespaceChild() {
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, nullptr, 0);
    }
    NamespaceChild(const NamespaceChild&) = delete;
    NamespaceChild& operator=(const NamespaceChild&) = delete;
    [[nodiscard]] int pid() const { return m_pid; }

private:
    int m_pid = -1;
};

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
