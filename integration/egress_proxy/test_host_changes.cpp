// The host's own addresses and the sandboxes behind its bridges, decided when
// a connection is dialled: the proxy runs in a network namespace of the
// test's own ("the host"), where the test adds addresses, bridges and the
// sandboxes behind them while the proxy runs. A canary listens on 0.0.0.0 in
// that namespace, as a host service would. Nothing here leaves the namespaces
// the test creates.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <list>
#include <optional>
#include <stdexcept>
#include <thread>
#include <string>
#include <vector>

#include "suite_support.hpp"

using namespace std::chrono_literals;

namespace {

using suite::must;

// The proxy's namespace ("the host", ag33h + pid) with a canary greeting on
// 0.0.0.0:2525, and the namespaces behind it (ag33<letter> + pid): each
// reached over a veth pair, either straight (a LAN host) or through a bridge
// in the host namespace.
class Host {
public:
    Host() : m_id(std::to_string(::getpid())), name("ag33h" + m_id) {
        remove();
        try {
            must("ip netns add " + name);
            must("ip -n " + name + " link set lo up");
            m_canary.emplace(
                std::vector<std::string>{"ip", "netns", "exec", name, suite::upstream_bin(), "greet:0.0.0.0:2525"});
            if (m_canary->wait_for_line("ready", 10s).empty()) throw std::runtime_error("the canary did not start");
        } catch (...) {
            m_canary.reset();
            remove();  // no destructor runs for a constructor that throws
            throw;
        }
    }
    ~Host() {
        leave();
        m_peers.clear();
        m_canary.reset();
        remove();
    }
    Host(const Host&) = delete;
    Host& operator=(const Host&) = delete;

    // Runs `ip ARGS` in the host namespace.
    void ip(const std::string& args) const { must("ip -n " + name + " " + args); }

    // A namespace `letter` behind veth ag33<letter> of the host: the host side
    // gets GATEWAY/24 (on `bridge` instead when given, the veth then one of
    // its ports), the far side GATEWAY+1 with a greeter on port 25.
    void add_peer(char letter, const std::string& net, const std::string& bridge = {}) {
        const std::string peer = std::string("ag33") + letter + m_id;
        const std::string veth = std::string("ag33") + letter;
        must("ip netns add " + peer);
        m_peer_names.push_back(peer);
        ip("link add " + veth + " type veth peer name eth0 netns " + peer);
        if (bridge.empty()) {
            ip("addr add " + net + ".1/24 dev " + veth);
        } else {
            ip("link set " + veth + " master " + bridge);
        }
        ip("link set " + veth + " up");
        must("ip -n " + peer + " addr add " + net + ".2/24 dev eth0");
        must("ip -n " + peer + " link set eth0 up");
        must("ip -n " + peer + " link set lo up");
        auto& greeter = m_peers.emplace_back(
            std::vector<std::string>{"ip", "netns", "exec", peer, suite::upstream_bin(), "greet:" + net + ".2:25"});
        if (greeter.wait_for_line("ready", 10s).empty()) throw std::runtime_error("a greeter did not start");
    }
    // A bridge in the host namespace, with `address` (CIDR) when given.
    void add_bridge(const std::string& bridge, const std::string& address) const {
        ip("link add " + bridge + " type bridge");
        if (!address.empty()) ip("addr add " + address + " dev " + bridge);
        ip("link set " + bridge + " up");
    }

    // This thread (and what it starts from now on) into the host namespace, and back.
    void enter() {
        if (m_home >= 0) return;
        m_home = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        const int target = ::open(("/var/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
        const bool ok = m_home >= 0 && target >= 0 && ::setns(target, CLONE_NEWNET) == 0;
        if (target >= 0) ::close(target);
        if (!ok) throw std::runtime_error("cannot enter namespace " + name);
    }
    void leave() {
        if (m_home < 0) return;
        ::setns(m_home, CLONE_NEWNET);
        ::close(m_home);
        m_home = -1;
    }

private:
    void remove() {
        for (const auto& peer : m_peer_names) suite::run("ip netns del " + peer);
        for (const char letter : std::string("abcdefg")) suite::run(std::string("ip netns del ag33") + letter + m_id);
        suite::run("ip netns del " + name);
    }

    std::string m_id;

public:
    const std::string name;

private:
    int m_home = -1;
    std::optional<suite::Child> m_canary;
    std::list<suite::Child> m_peers;
    std::vector<std::string> m_peer_names;
};

struct Fixture {
    Host host;
    suite::ProxyFiles files;
    std::optional<suite::Proxy> proxy;
    Fixture(const std::vector<std::string>& rules, bool allow_lan, const std::string& hosts = {}) {
        files.write_policy(suite::policy_allowing(rules, allow_lan));
        files.write_resolve(hosts);
        host.enter();  // the proxy and the suite's clients live in the host namespace
        proxy.emplace(files, std::vector<std::string>{"--connect-timeout-ms", "1000"});
    }
    // CONNECT through the proxy; `banner`: the first bytes a 200 tunnel brings back.
    suite::Client::Response connect(const std::string& authority, std::string* banner = nullptr) {
        suite::Client client(proxy->port, 2s);
        auto response = suite::connect_through(client, authority);
        if (banner != nullptr && response.status == 200) *banner = client.read_exact(4);
        return response;
    }
    std::string logged_reason(const std::string& destination) const {
        std::string reason;
        for (const auto& line : files.log_lines()) {
            if (line.value("event", "") == "decision" && line.value("host", "") == destination)
                reason = line.value("reason", "");
        }
        return reason;
    }
};

}  // namespace

TEST_CASE("an address the host gains after the proxy started is refused when dialled") {
    SUITE_REQUIRE_READY();
    Fixture f({"192.0.3.50:2525", "late.test:2525"}, false, "192.0.3.50 late.test\n");
    // Not yet an address of the host: allowed by the policy, and nothing is there.
    CHECK(f.connect("192.0.3.50:2525").status == 502);

    // A bridge appears with that address (a new sandbox's gateway, a DHCP lease).
    f.host.add_bridge("ag33new", "192.0.3.50/24");
    std::string banner;
    auto literal = f.connect("192.0.3.50:2525", &banner);
    CHECK(literal.status == 403);
    CHECK(literal.header("X-Agentctl-Reason") == "host-address");
    CHECK(banner.empty());
    CHECK(f.logged_reason("192.0.3.50") == "host-address");

    auto by_name = f.connect("late.test:2525", &banner);
    CHECK(by_name.status == 403);
    CHECK(by_name.header("X-Agentctl-Reason") == "host-address");
    CHECK(banner.empty());

    // The same for an address added to an interface the host already had.
    f.host.ip("addr add 192.0.3.60/32 dev lo");
    f.files.write_resolve("192.0.3.60 late.test\n");
    f.proxy->process().signal(SIGHUP);  // the resolve file is read again; the policy is unchanged
    std::this_thread::sleep_for(200ms);
    CHECK(f.connect("late.test:2525").header("X-Agentctl-Reason") == "host-address");
}

TEST_CASE("allowed LAN (--allow-lan) reaches neither the host's addresses nor the sandboxes behind its bridges") {
    SUITE_REQUIRE_READY();
    Fixture f({}, true);
    // A LAN host on a veth of its own: --allow-lan opens it.
    f.host.add_peer('a', "10.233.0");
    std::string banner;
    auto lan = f.connect("10.233.0.2:25", &banner);
    CHECK(lan.status == 200);
    CHECK(lan.header("X-Agentctl-Reason").empty());
    CHECK(banner == "220 ");

    // Another sandbox: behind a bridge whose only ports are veths, with the
    // host as its gateway; made after the proxy started.
    f.host.add_bridge("ag33sb", "10.232.0.1/24");
    f.host.add_peer('b', "10.232.0", "ag33sb");
    banner.clear();
    auto sandbox = f.connect("10.232.0.2:25", &banner);
    CHECK(sandbox.status == 403);
    CHECK(sandbox.header("X-Agentctl-Reason") == "sandbox-network");
    CHECK(banner.empty());
    CHECK(f.logged_reason("10.232.0.2") == "sandbox-network");

    auto gateway = f.connect("10.232.0.1:2525", &banner);
    CHECK(gateway.status == 403);
    CHECK(gateway.header("X-Agentctl-Reason") == "host-address");
    CHECK(banner.empty());
    CHECK(f.connect("10.233.0.1:2525").header("X-Agentctl-Reason") == "host-address");

    // An unconfined bridge with no address of the host on it is a sandbox network too.
    f.host.add_bridge("ag33un", "");
    f.host.ip("route add 10.234.0.0/24 dev ag33un");
    CHECK(f.connect("10.234.0.7:25").header("X-Agentctl-Reason") == "sandbox-network");

    // An uplink bridge (a port that is neither veth nor tap, here an ifb) is the LAN.
    f.host.add_bridge("ag33up", "10.235.0.1/24");
    f.host.ip("link add ag33if type ifb");
    f.host.ip("link set ag33if master ag33up");
    f.host.add_peer('c', "10.235.0", "ag33up");
    banner.clear();
    auto uplink = f.connect("10.235.0.2:25", &banner);
    CHECK(uplink.status == 200);
    CHECK(banner == "220 ");
}
