// Digests of nftables objects read from the kernel: made in a network
// namespace of the test's own (a child process holds it; a thread of this
// process joins it to ask the kernel, and `nsenter nft -f` changes its
// ruleset), so nothing of the host's ruleset is read or touched. Needs root.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "provider/incus/network/nft_kernel.hpp"
#include "support/net_namespace.hpp"

using namespace agentctl::provider::incus;

namespace {

// The test's network namespace, and what the test does in it.
class Namespace {
public:
    // Runs `work` on a thread that has joined the namespace.
    void inside(const std::function<void()>& work) const {
        bool joined = false;
        std::thread thread([&] {
            const int fd = ::open(path().c_str(), O_RDONLY | O_CLOEXEC);
            joined = fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
            if (fd >= 0) ::close(fd);
            if (joined) work();
        });
        thread.join();
        REQUIRE(joined);
    }
    // `nft -f` of `script` in the namespace.
    void nft(const std::string& script) const {
        const std::string file = "/tmp/agentctl-nft-kernel-test-" + std::to_string(m_child.pid()) + ".nft";
        std::ofstream(file) << script;
        const int status = std::system(("nsenter --net=" + path() + " nft -f " + file + " 2>&1").c_str());
        std::remove(file.c_str());
        REQUIRE(status == 0);
    }
    // What `nft ARGUMENTS` prints in the namespace.
    [[nodiscard]] std::string output(const std::string& arguments) const {
        std::string out;
        FILE* pipe = ::popen(("nsenter --net=" + path() + " nft " + arguments).c_str(), "r");
        REQUIRE(pipe != nullptr);
        char buffer[4096];
        for (std::size_t n = 0; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
        ::pclose(pipe);
        return out;
    }
    [[nodiscard]] std::string table_digest(const std::string& table) const {
        std::optional<std::string> digest;
        inside([&] { digest = nft_inet_table_digest(table); });
        REQUIRE(digest);
        return *digest;
    }
    [[nodiscard]] std::string chain_digest(const std::string& table, const std::string& chain) const {
        std::optional<std::string> digest;
        inside([&] { digest = nft_inet_chain_digest(table, chain); });
        REQUIRE(digest);
        return *digest;
    }

private:
    [[nodiscard]] std::string path() const { return m_child.path(); }
    agentctl::test::NamespaceChild m_child;
};

bool root() { return ::geteuid() == 0; }

// A table shaped like agentctl's: base chains, anonymous sets, a named set,
// a counter on what leaves through loopback.
const std::string k_table = R"(table inet t {}
delete table inet t
table inet t {
  set allowed { type ipv4_addr; elements = { 192.0.2.1 } }
  chain output {
    type filter hook output priority filter - 5; policy accept;
    oifname "lo" udp dport 9 counter
    ip daddr @allowed accept
  }
  chain from_sandbox {
    ip daddr { 192.0.2.7, 255.255.255.255 } udp dport 67 accept
    meta l4proto tcp reject with tcp reset
  }
}
)";

void send_udp_to_loopback() {
    const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
    REQUIRE(s >= 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(::sendto(s, "x", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) == 1);
    ::close(s);
}

}  // namespace

TEST_CASE("a table's kernel digest changes with what the table enforces, and only then", "[nft]") {
    if (!root()) {
        WARN("needs root (a network namespace of its own)");
        return;
    }
    const Namespace ns;
    CHECK(ns.table_digest("t").empty());
    ns.nft(k_table);
    const auto digest = ns.table_digest("t");
    CHECK(is_kernel_digest(digest));
    CHECK_FALSE(is_kernel_digest("00112233aabbccdd"));

    // Defined again as it was: new handles, the same digest.
    ns.nft(k_table);
    CHECK(ns.table_digest("t") == digest);

    // Traffic moves the counter, not the digest.
    const auto before = ns.output("list table inet t");
    ns.inside(send_udp_to_loopback);
    REQUIRE(ns.output("list table inet t") != before);
    CHECK(ns.table_digest("t") == digest);

    SECTION("a rule added") {
        ns.nft("add rule inet t from_sandbox accept\n");
        CHECK(ns.table_digest("t") != digest);
    }
    SECTION("an element added to a set") {
        ns.nft("add element inet t allowed { 198.51.100.1 }\n");
        CHECK(ns.table_digest("t") != digest);
    }
    SECTION("the table made dormant") {
        ns.nft("add table inet t { flags dormant; }\n");
        CHECK(ns.table_digest("t") != digest);
    }
    SECTION("a chain's policy") {
        ns.nft("add chain inet t output { policy drop; }\n");
        CHECK(ns.table_digest("t") != digest);
    }
    SECTION("a chain added") {
        ns.nft("add chain inet t other\n");
        CHECK(ns.table_digest("t") != digest);
    }
    SECTION("another table changed") {
        ns.nft("table inet u {\n  chain c {\n    accept\n  }\n}\n");
        CHECK(ns.table_digest("t") == digest);
    }
}

TEST_CASE("a chain's kernel digest covers its rules and the sets they look up", "[nft]") {
    if (!root()) {
        WARN("needs root (a network namespace of its own)");
        return;
    }
    const Namespace ns;
    CHECK(ns.chain_digest("t", "from_sandbox").empty());
    ns.nft(k_table);
    const auto digest = ns.chain_digest("t", "output");
    CHECK(is_kernel_digest(digest));
    CHECK(digest != ns.chain_digest("t", "from_sandbox"));
    ns.nft(k_table);
    CHECK(ns.chain_digest("t", "output") == digest);

    SECTION("an element added to a set a rule looks up") {
        ns.nft("add element inet t allowed { 198.51.100.1 }\n");
        CHECK(ns.chain_digest("t", "output") != digest);
    }
    SECTION("a rule added") {
        ns.nft("add rule inet t output accept\n");
        CHECK(ns.chain_digest("t", "output") != digest);
    }
    SECTION("another chain of the table changed") {
        ns.nft("add rule inet t from_sandbox accept\n");
        CHECK(ns.chain_digest("t", "output") == digest);
    }
    SECTION("the chain deleted") {
        ns.nft("flush chain inet t output\ndelete chain inet t output\n");
        CHECK(ns.chain_digest("t", "output").empty());
    }
}

TEST_CASE("a chain's kernel digest does not depend on the names the kernel gives inline sets", "[nft]") {
    if (!root()) {
        WARN("needs root (a network namespace of its own)");
        return;
    }
    const Namespace ns;
    // `first`'s inline set is named __set0 and `second`'s __set1, in a table
    // others share, as Incus's is.
    ns.nft(R"(table inet t {
  chain first { ip daddr { 192.0.2.6, 192.0.2.7 } accept; }
  chain second { ip daddr { 192.0.2.8, 192.0.2.9 } drop; }
}
)");
    REQUIRE(ns.output("--debug=netlink list chain inet t second").find("set __set1") != std::string::npos);
    const auto digest = ns.chain_digest("t", "second");
    // `first`'s rule goes, `second`'s is made again as it was: its set is now __set0.
    ns.nft("flush chain inet t first\nflush chain inet t second\n");
    ns.nft("add rule inet t second ip daddr { 192.0.2.8, 192.0.2.9 } drop\n");
    REQUIRE(ns.output("--debug=netlink list chain inet t second").find("set __set0") != std::string::npos);
    CHECK(ns.chain_digest("t", "second") == digest);
    ns.nft("flush chain inet t second\nadd rule inet t second ip daddr { 192.0.2.8, 192.0.2.10 } drop\n");
    CHECK(ns.chain_digest("t", "second") != digest);
}
