// What a sandbox can pin of the host's TCP memory through its proxy: tunnels
// to a destination that accepts and never reads, each filled until the
// sandbox's sends block. Bounded by the number of tunnels (--max-tunnels) and
// by the proxy's socket buffers (k_socket_buffer_bytes).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "suite_support.hpp"

using namespace std::chrono_literals;

namespace {

// Sends on every client until none of them takes another byte for a while
// (each is capped at `most` bytes); returns the bytes sent in all.
std::size_t fill_until_blocked(std::vector<suite::Client>& clients, std::size_t most) {
    const std::string chunk(64 * 1024, 'x');
    std::vector<std::size_t> sent(clients.size(), 0);
    for (auto& client : clients) ::fcntl(client.fd(), F_SETFL, ::fcntl(client.fd(), F_GETFL) | O_NONBLOCK);
    for (int quiet_rounds = 0; quiet_rounds < 5;) {
        bool moved = false;
        for (std::size_t i = 0; i < clients.size(); ++i) {
            while (sent[i] < most) {
                const ssize_t n = ::send(clients[i].fd(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
                if (n <= 0) break;
                sent[i] += static_cast<std::size_t>(n);
                moved = true;
            }
        }
        quiet_rounds = moved ? 0 : quiet_rounds + 1;
        std::this_thread::sleep_for(50ms);
    }
    std::size_t total = 0;
    for (auto n : sent) total += n;
    return total;
}

}  // namespace

TEST_CASE("tunnels to a destination that never reads are bounded in number and in socket memory") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_policy(suite::policy_allowing({"sink.test:11"}));
    files.write_resolve("192.0.3.2 sink.test\n");
    constexpr std::size_t k_tunnels = 20;
    suite::Proxy proxy(files, {"--max-tunnels", std::to_string(k_tunnels), "--idle-timeout-ms", "4000"});

    std::vector<suite::Client> clients;
    for (std::size_t i = 0; i < k_tunnels; ++i) {
        auto& client = clients.emplace_back(proxy.port);
        REQUIRE(suite::connect_through(client, "sink.test:11").status == 200);
    }
    // One more is refused, with the reason in the answer and the log.
    {
        suite::Client extra(proxy.port);
        auto refused = suite::connect_through(extra, "sink.test:11");
        CHECK(refused.status == 503);
        CHECK(refused.header("X-Agentctl-Reason") == "tunnel-limit");
        bool logged = false;
        for (const auto& line : files.log_lines()) logged |= line.value("reason", "") == "tunnel-limit";
        CHECK(logged);
    }

    const std::size_t sent = fill_until_blocked(clients, 64u << 20);
    const std::size_t held = suite::socket_memory_bytes(proxy.process().pid());
    INFO("sent " << sent / 1024 << " KiB in all; the proxy's sockets hold " << held / 1024 << " KiB, "
                 << held / k_tunnels / 1024 << " KiB per tunnel");
    // Without the bounds each tunnel held about 4 MiB here; with them, at most
    // the sandbox leg's receive buffer and the destination leg's send buffer,
    // 512 KiB each as the kernel counts them.
    CHECK(held <= k_tunnels * (1280u << 10));
    CHECK(sent > 0);
    WARN("tunnel memory: " << held / k_tunnels / 1024 << " KiB per tunnel held by the proxy's sockets, "
                           << sent / k_tunnels / 1024 << " KiB sent per tunnel");

    // Stuck tunnels end at the idle timeout, and give their places back.
    std::this_thread::sleep_for(4500ms);
    suite::Client later(proxy.port);
    CHECK(suite::connect_through(later, "sink.test:11").status == 200);
}

TEST_CASE("downloads a sandbox stops reading are bounded in socket memory") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_policy(suite::policy_allowing({"bulk.test:80"}));
    files.write_resolve("192.0.3.2 bulk.test\n");
    constexpr std::size_t k_tunnels = 20;
    suite::Proxy proxy(files, {"--max-tunnels", std::to_string(k_tunnels)});

    std::vector<suite::Client> clients;
    for (std::size_t i = 0; i < k_tunnels; ++i) {
        auto& client = clients.emplace_back(proxy.port);
        REQUIRE(suite::connect_through(client, "bulk.test:80").status == 200);
        client.send("GET /bytes/100000000 HTTP/1.1\r\nHost: bulk.test\r\n\r\n");  // and never read
    }
    // Until the proxy's sockets stop filling up.
    std::size_t held = 0;
    for (int i = 0; i < 40; ++i) {
        std::this_thread::sleep_for(100ms);
        const std::size_t now = suite::socket_memory_bytes(proxy.process().pid());
        if (now == held) break;
        held = now;
    }
    INFO("the proxy's sockets hold " << held / 1024 << " KiB, " << held / k_tunnels / 1024 << " KiB per tunnel");
    // The destination leg's receive buffer (2 MiB as the kernel counts it)
    // and the sandbox leg's send buffer (512 KiB).
    CHECK(held <= k_tunnels * (2816u << 10));
    WARN("download memory: " << held / k_tunnels / 1024 << " KiB per tunnel held by the proxy's sockets");
}
