// Every protocol an agent speaks through the proxy, with real sockets: each
// either works or is refused with a clear reason, and none hangs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <thread>

#include "core/files.hpp"
#include "suite_support.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto k_idle = 400ms;                 // the proxy's idle timeout in this file (default: 15 minutes)
constexpr std::size_t k_grown_pipe = 1 << 20;  // the size the relay grows a bulk direction's pipe to

struct Fixture {
    suite::Network network;
    suite::ProxyFiles files;
    std::optional<suite::Proxy> proxy;
    explicit Fixture(std::chrono::milliseconds idle = k_idle) {
        files.write_policy(
            suite::policy_allowing({"web.test:80", "web2.test:80", "echo.test:7", "drain.test:10", "greet.test:25"}));
        files.write_resolve("192.0.3.2 web.test echo.test drain.test greet.test other.test\n192.0.3.3 web2.test\n");
        proxy.emplace(files, std::vector<std::string>{"--idle-timeout-ms", std::to_string(idle.count()),
                                                      "--header-timeout-ms", "2000"});
    }
};

// RFC 6455's example key and the accept value a conforming server derives from it.
constexpr const char* k_ws_key = "dGhlIHNhbXBsZSBub25jZQ==";
constexpr const char* k_ws_accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

std::string ws_upgrade(const std::string& target, const std::string& host) {
    return "GET " + target + " HTTP/1.1\r\nHost: " + host +
           "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + k_ws_key +
           "\r\nSec-WebSocket-Version: 13\r\n\r\n";
}

// A masked binary frame, as a client sends it.
std::string ws_frame(const std::string& payload) {
    std::string frame(1, static_cast<char>(0x82));
    if (payload.size() < 126) {
        frame += static_cast<char>(0x80 | payload.size());
    } else if (payload.size() < 65536) {
        frame += static_cast<char>(0x80 | 126);
        frame += static_cast<char>(payload.size() >> 8);
        frame += static_cast<char>(payload.size() & 0xff);
    } else {
        frame += static_cast<char>(0x80 | 127);
        for (int shift = 56; shift >= 0; shift -= 8) frame += static_cast<char>((payload.size() >> shift) & 0xff);
    }
    const char mask[4] = {0x12, 0x34, 0x56, 0x78};
    frame.append(mask, 4);
    for (std::size_t i = 0; i < payload.size(); ++i) frame += static_cast<char>(payload[i] ^ mask[i % 4]);
    return frame;
}

// The payload of one message from the server: unmasked frames up to the one with FIN set.
std::string ws_read(suite::Client& client) {
    std::string payload;
    for (;;) {
        std::string head = client.read_exact(2);
        if (head.size() < 2) return payload + "<closed>";
        std::uint64_t length = static_cast<unsigned char>(head[1]) & 0x7f;
        int extra = length == 126 ? 2 : length == 127 ? 8 : 0;
        if (extra > 0) {
            std::string bytes = client.read_exact(static_cast<std::size_t>(extra));
            length = 0;
            for (char c : bytes) length = (length << 8) | static_cast<unsigned char>(c);
        }
        payload += client.read_exact(static_cast<std::size_t>(length));
        if ((static_cast<unsigned char>(head[0]) & 0x80) != 0) return payload;
    }
}

void check_websocket_echo(suite::Client& client) {
    auto upgraded = client.read_response();
    REQUIRE(upgraded.status == 101);
    CHECK(upgraded.header("Sec-WebSocket-Accept") == k_ws_accept);
    CHECK(upgraded.header("Upgrade") == "websocket");
    for (std::size_t size : {5ul, 200ul, 70'000ul, 1ul}) {
        std::string payload(size, static_cast<char>('a' + size % 26));
        client.send(ws_frame(payload));
        CHECK(ws_read(client) == payload);
    }
}

std::size_t upload_mib() {
    // 1 GiB per upload (about 50 s each under ASan); AGENTCTL_PROXY_UPLOAD_MIB=N moves N MiB instead.
    const char* text = std::getenv("AGENTCTL_PROXY_UPLOAD_MIB");
    return text != nullptr ? std::stoul(text) : 1024;
}

}  // namespace

TEST_CASE("WebSocket: an absolute-form Upgrade request becomes a tunnel after 101") {
    SUITE_REQUIRE_READY();
    Fixture f;
    suite::Client client(f.proxy->port);
    client.send(ws_upgrade("http://web.test/chat", "web.test"));
    check_websocket_echo(client);
    // Idle longer than the idle timeout: the upgraded connection is closed like a tunnel.
    CHECK(client.closed_by_peer());

    suite::Client refused(f.proxy->port);
    refused.send(ws_upgrade("http://other.test/chat", "other.test"));
    auto response = refused.read_response();
    CHECK(response.status == 403);
    CHECK(response.header("X-Agentctl-Reason") == "not-allowlisted");
}

TEST_CASE("WebSocket inside a CONNECT tunnel") {
    SUITE_REQUIRE_READY();
    Fixture f;
    suite::Client client(f.proxy->port);
    REQUIRE(suite::connect_through(client, "web.test:80").status == 200);
    client.send(ws_upgrade("/chat", "web.test"));
    check_websocket_echo(client);
}

TEST_CASE("server-sent events: a stream that keeps sending outlives the idle timeout, a quiet one does not") {
    SUITE_REQUIRE_READY();
    Fixture f;
    // 12 events 100 ms apart: three times the idle timeout in all, never idle for it.
    {
        suite::Client client(f.proxy->port);
        auto started = Clock::now();
        client.send(
            "GET http://web.test/events/12/100 HTTP/1.1\r\nHost: web.test\r\nAccept: text/event-stream\r\n\r\n");
        auto response = client.read_response();
        CHECK(response.status == 200);
        CHECK(response.header("Content-Type") == "text/event-stream");
        CHECK(response.body.find("data: event 11\n\n") != std::string::npos);
        CHECK(Clock::now() - started >= 1000ms);
    }
    {
        suite::Client client(f.proxy->port);
        REQUIRE(suite::connect_through(client, "web.test:80").status == 200);
        client.send("GET /events/12/100 HTTP/1.1\r\nHost: web.test\r\n\r\n");
        CHECK(client.read_response().body.find("data: event 11\n\n") != std::string::npos);
    }
    // One event, then silence: closed after the idle timeout, plain and tunnelled.
    for (bool tunnel : {false, true}) {
        INFO("through CONNECT: " << tunnel);
        suite::Client client(f.proxy->port);
        if (tunnel) {
            REQUIRE(suite::connect_through(client, "web.test:80").status == 200);
            client.send("GET /quiet HTTP/1.1\r\nHost: web.test\r\n\r\n");
        } else {
            client.send("GET http://web.test/quiet HTTP/1.1\r\nHost: web.test\r\n\r\n");
        }
        auto started = Clock::now();
        auto text = client.read_to_end();
        auto took = Clock::now() - started;
        CHECK(text.find("data: event 0") != std::string::npos);
        CHECK(took >= k_idle - 50ms);
        CHECK(took < 3s);
    }
}

TEST_CASE("large uploads stream through: chunked, and with Expect: 100-continue") {
    SUITE_REQUIRE_READY();
    Fixture f(30s);  // a busy machine may stall the origin longer than this file's short idle timeout
    const std::size_t mib = upload_mib();
    const std::string block(1 << 20, 'u');
    {
        suite::Client client(f.proxy->port, 30s);
        client.send("POST http://web.test/upload HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n\r\n");
        const std::string chunk = "100000\r\n" + block + "\r\n";
        for (std::size_t i = 0; i < mib; ++i) client.send(chunk);
        client.send("0\r\n\r\n");
        auto response = client.read_response();
        CHECK(response.status == 200);
        CHECK(response.body.find(" body=" + std::to_string(mib << 20) + " ") != std::string::npos);
    }
    {
        suite::Client client(f.proxy->port, 30s);
        client.send("PUT http://web.test/upload HTTP/1.1\r\nHost: web.test\r\nContent-Length: " +
                    std::to_string(mib << 20) + "\r\nExpect: 100-continue\r\n\r\n");
        auto go_on = client.read_response();
        REQUIRE(go_on.status == 100);
        for (std::size_t i = 0; i < mib; ++i) client.send(block);
        auto response = client.read_response();
        CHECK(response.status == 200);
        CHECK(response.body.find(" body=" + std::to_string(mib << 20) + " ") != std::string::npos);
        CHECK(response.body.find(" expect= ") != std::string::npos);  // the proxy answered the expectation
    }
}

TEST_CASE("a destination that speaks first is heard before the client sends a byte") {
    SUITE_REQUIRE_READY();
    Fixture f;
    // SMTP and SSH servers greet first. The greeting may reach the proxy
    // before its relay first waits on the destination or after: repeated, so
    // that both orders are likely to occur.
    const std::string greeting = std::string("220 ") + suite::Network::k_origin_a + ":25 ready\r\n";
    for (int i = 0; i < 20; ++i) {
        suite::Client client(f.proxy->port, 3s);
        REQUIRE(suite::connect_through(client, "greet.test:25").status == 200);
        REQUIRE(client.read_exact(greeting.size()) == greeting);
        CHECK(suite::echo_on(client, "EHLO agent.test\r\n"));
    }
}

TEST_CASE("half-closed connections: the other direction keeps going") {
    SUITE_REQUIRE_READY();
    Fixture f;
    {
        suite::Client client(f.proxy->port);
        REQUIRE(suite::connect_through(client, "drain.test:10").status == 200);
        client.send(std::string(300'000, 'h'));
        client.shutdown_send();
        CHECK(client.read_to_end() == "received 300000 bytes\n");
    }
    {
        suite::Client client(f.proxy->port);
        client.send("GET http://web.test/after-fin HTTP/1.1\r\nHost: web.test\r\n\r\n");
        client.shutdown_send();
        auto response = client.read_response();
        CHECK(response.status == 200);
        CHECK(response.body.find("target=/after-fin ") != std::string::npos);
        CHECK(client.closed_by_peer());
    }
}

TEST_CASE("pipelined keep-alive requests to two hosts are each decided, and a refusal ends the connection") {
    SUITE_REQUIRE_READY();
    Fixture f;
    suite::Client client(f.proxy->port);
    client.send(
        "GET http://web.test/one HTTP/1.1\r\nHost: web.test\r\n\r\n"
        "GET http://web2.test/two HTTP/1.1\r\nHost: web2.test\r\n\r\n"
        "GET http://other.test/three HTTP/1.1\r\nHost: other.test\r\n\r\n"
        "GET http://web.test/four HTTP/1.1\r\nHost: web.test\r\n\r\n");
    auto one = client.read_response();
    CHECK(one.body.find("server=192.0.3.2:80 method=GET target=/one ") != std::string::npos);
    auto two = client.read_response();
    CHECK(two.body.find("server=192.0.3.3:80 method=GET target=/two ") != std::string::npos);
    auto three = client.read_response();
    CHECK(three.status == 403);
    CHECK(three.header("X-Agentctl-Reason") == "not-allowlisted");
    CHECK(client.closed_by_peer());  // /four is never sent anywhere
    std::vector<std::string> decided;
    for (const auto& line : f.files.log_lines()) {
        if (line.value("event", "") == "decision")
            decided.push_back(line.value("host", "") + "=" + line.value("decision", ""));
    }
    CHECK(decided == std::vector<std::string>{"web.test=allow", "web2.test=allow", "other.test=deny"});
}

TEST_CASE("a refusal behind responses the client has not read yet arrives whole, after them") {
    // 32 MiB of responses fill the socket buffers between the proxy and a
    // client that does not read for a while; the refusal that follows them is
    // written once the last of them is (whether it then finds room at once
    // depends on timing), and must come whole, in order, then the close.
    SUITE_REQUIRE_READY();
    Fixture f(30s);
    suite::Client client(f.proxy->port, 30s);
    constexpr int k_responses = 8;
    constexpr std::size_t k_body = 4 << 20;
    std::string requests;
    for (int i = 0; i < k_responses; ++i)
        requests += "GET http://web.test/bytes/" + std::to_string(k_body) + " HTTP/1.1\r\nHost: web.test\r\n\r\n";
    requests += "GET http://other.test/refused HTTP/1.1\r\nHost: other.test\r\n\r\n";
    client.send(requests);
    std::this_thread::sleep_for(300ms);
    for (int i = 0; i < k_responses; ++i) {
        auto response = client.read_response();
        REQUIRE(response.status == 200);
        CHECK(response.body == std::string(k_body, 'x'));
    }
    auto refused = client.read_response();
    CHECK(refused.status == 403);
    CHECK(refused.header("X-Agentctl-Reason") == "not-allowlisted");
    CHECK(client.closed_by_peer());
}

TEST_CASE("HTTP/2 inside CONNECT: a long bidirectional exchange of opaque bytes") {
    SUITE_REQUIRE_READY();
    Fixture f;
    suite::Client client(f.proxy->port);
    REQUIRE(suite::connect_through(client, "echo.test:7").status == 200);
    // The client preface, then frames both ways; the proxy never looks inside.
    const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    client.send(preface);
    CHECK(client.read_exact(preface.size()) == preface);
    std::string frame(16 * 1024 + 9, '\0');
    bool same = true;
    for (int i = 0; i < 256 && same; ++i) {  // 4 MiB each way, one frame at a time
        for (std::size_t k = 0; k < frame.size(); ++k) frame[k] = static_cast<char>((k * 31 + i) & 0xff);
        client.send(frame);
        same = client.read_exact(frame.size()) == frame;
    }
    CHECK(same);
}

TEST_CASE("bulk through CONNECT: 128 MiB each way at once, through a reader that starts late, arrives intact") {
    SUITE_REQUIRE_READY();
    Fixture f(30s);
    const pid_t proxy_pid = f.proxy->process().pid();
    // A pattern with no short period, so a lost, doubled or reordered block shows.
    auto block_of = [](std::size_t index) {
        std::string block(1 << 20, '\0');
        for (std::size_t k = 0; k < block.size(); ++k)
            block[k] = static_cast<char>((k * 131 + index * 7 + k / 4093) & 0xff);
        return block;
    };
    constexpr std::size_t k_blocks = 128;
    for (int round = 0; round < 2; ++round) {  // the second tunnel runs after the first gave its pipes up
        {
            suite::Client client(f.proxy->port, 30s);
            REQUIRE(suite::connect_through(client, "echo.test:7").status == 200);
            std::string send_error;
            std::thread sender([&] {
                try {
                    for (std::size_t i = 0; i < k_blocks; ++i) client.send(block_of(i));
                } catch (const std::exception& e) {
                    send_error = e.what();
                }
            });
            // Nothing is read for a while: socket buffers and the relay's pipes fill
            // both ways, and each direction waits for room before it reads again.
            std::this_thread::sleep_for(300ms);
            std::size_t intact = 0;
            for (std::size_t i = 0; i < k_blocks; ++i) {
                if (client.read_exact(1 << 20) != block_of(i)) break;
                ++intact;
            }
            sender.join();
            CHECK(send_error.empty());
            CHECK(intact == k_blocks);
            // Both directions moved bulk data and now wait: each keeps its grown pipe.
            CHECK(suite::pipes_of_size(proxy_pid, k_grown_pipe) == 2);
            // The tunnel still carries a small exchange after the bulk.
            client.send("ping");
            CHECK(client.read_exact(4) == "ping");
        }
        // A closed tunnel leaves no grown pipe behind (spares are default-size).
        auto deadline = Clock::now() + 5s;
        while (suite::pipes_of_size(proxy_pid, k_grown_pipe) > 0 && Clock::now() < deadline)
            std::this_thread::sleep_for(20ms);
        CHECK(suite::pipes_of_size(proxy_pid, k_grown_pipe) == 0);
    }
}

TEST_CASE("bulk through CONNECT: one proxy grows at most 16 pipes, however many tunnels move bulk data") {
    SUITE_REQUIRE_READY();
    Fixture f(30s);
    const pid_t proxy_pid = f.proxy->process().pid();
    const std::string block(4 << 20, 'b');
    std::vector<suite::Client> tunnels;
    for (int i = 0; i < 12; ++i) {  // 24 directions, each moving 4 MiB
        tunnels.emplace_back(f.proxy->port, 30s);
        REQUIRE(suite::connect_through(tunnels.back(), "echo.test:7").status == 200);
        bool sent = false;
        std::thread sender([&] {
            try {
                tunnels.back().send(block);
                sent = true;
            } catch (const std::exception&) {
            }
        });
        std::string back = tunnels.back().read_exact(block.size());
        sender.join();
        REQUIRE(sent);
        REQUIRE(back == block);
    }
    std::size_t grown = suite::pipes_of_size(proxy_pid, k_grown_pipe);
    CHECK(grown > 0);
    CHECK(grown <= 16);
    // Every tunnel still works, grown pipe or not.
    for (auto& tunnel : tunnels) {
        tunnel.send("ping");
        CHECK(tunnel.read_exact(4) == "ping");
    }
}

TEST_CASE("the sandbox leg of a tunnel uses cubic, the destination leg the host's default congestion control") {
    // The host's default may pace every connection itself (BBR without fq);
    // the leg to the sandbox stays on this machine and needs no pacing
    // (docs/egress-proxy.md). The kernel's default is read, never changed.
    SUITE_REQUIRE_READY();
    Fixture f;
    const pid_t proxy_pid = f.proxy->process().pid();
    std::string host_default = agentctl::core::read_file("/proc/sys/net/ipv4/tcp_congestion_control");
    host_default.erase(host_default.find_last_not_of("\n") + 1);
    REQUIRE_FALSE(host_default.empty());

    suite::Client client(f.proxy->port);
    REQUIRE(suite::connect_through(client, "echo.test:7").status == 200);
    REQUIRE(suite::echo_on(client, "hello"));
    sockaddr_in local{};
    socklen_t length = sizeof local;
    REQUIRE(::getsockname(client.fd(), reinterpret_cast<sockaddr*>(&local), &length) == 0);

    CHECK(suite::congestion_control_of(proxy_pid, ntohs(local.sin_port)) == "cubic");
    CHECK(suite::congestion_control_of(proxy_pid, 7) == host_default);
    bool logged = false;
    for (const auto& line : f.files.log_lines()) {
        if (line.value("event", "") == "start") logged = line.value("sandbox_leg_congestion", "") == "cubic";
    }
    CHECK(logged);
}

TEST_CASE("request heads near the 32 KiB limit pass, and past it they get 431") {
    SUITE_REQUIRE_READY();
    Fixture f;
    auto head_of = [](std::size_t total) {
        std::string head = "GET http://web.test/big-head HTTP/1.1\r\nHost: web.test\r\n";
        int fields = 1;
        while (head.size() + 2 < total) {
            std::string field = "X-Filler-" + std::to_string(fields) + ": ";
            std::size_t room = total - head.size() - 2 - field.size() - 2;
            field += std::string(std::min<std::size_t>(room, 200), 'f') + "\r\n";
            head += field;
            ++fields;
        }
        return std::make_pair(head + "\r\n", fields);
    };
    {
        auto [head, fields] = head_of(32 * 1024 - 64);
        suite::Client client(f.proxy->port);
        client.send(head);
        auto response = client.read_response();
        CHECK(response.status == 200);
        CHECK(response.body.find("fields=" + std::to_string(fields) + "\n") != std::string::npos);
    }
    {
        auto [head, fields] = head_of(32 * 1024 + 64);
        suite::Client client(f.proxy->port);
        try {
            client.send(head);
        } catch (const std::exception&) {
            // the proxy may answer and close before the whole head is sent
        }
        auto response = client.read_response();
        CHECK(response.status == 431);
        CHECK(response.header("X-Agentctl-Reason") == "header-too-large");
        CHECK(client.closed_by_peer());
    }
}
