// The pure parts of exec streaming: the operation's websocket secrets and
// their request targets (Incus client/incus_instances.go, ExecInstance and
// GetOperationWebsocket); and stream_exec over a transport's streams (any
// transport: the unix socket or TLS), with scripted server bytes.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <unistd.h>

#include "agentctl/error.hpp"
#include "provider/incus/exec_stream.hpp"
#include "provider/incus/payloads.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

TEST_CASE("exec websocket secrets come from the operation's fds", "[exec-stream]") {
    const auto metadata = Json::parse(R"({"fds": {"0": "s0", "1": "s1", "2": "s2", "control": "sc"}})");
    const auto secrets = parse_exec_secrets(metadata);
    CHECK(secrets.in == "s0");
    CHECK(secrets.out == "s1");
    CHECK(secrets.err == "s2");
    CHECK(secrets.control == "sc");
    CHECK_THROWS_WITH(parse_exec_secrets(Json::parse(R"({"fds": {"0": "s0"}})")),
                      Catch::Contains("without a \"control\" stream"));
    CHECK_THROWS_AS(parse_exec_secrets(Json()), Error);
}

TEST_CASE("exec websocket targets name the operation and the secret", "[exec-stream]") {
    CHECK(websocket_target("/1.0/operations/abc-123", "xyz") == "/1.0/operations/abc-123/websocket?secret=xyz");
    CHECK(websocket_target("abc-123", "xyz") == "/1.0/operations/abc-123/websocket?secret=xyz");
}

TEST_CASE("streamed exec payload: websockets, nothing recorded", "[exec-stream]") {
    GuestUser user{"agent", 1500, 1500, "/home/agent", "/bin/bash"};
    auto payload = streamed_exec_payload({"head", "-c", "10"}, {}, &user);
    CHECK(payload["wait-for-websocket"] == true);
    CHECK(payload["record-output"] == false);
    CHECK(payload["interactive"] == false);
    CHECK(payload["user"] == 1500);
}

namespace {

// One scripted connection: what the server sends, what the client wrote.
class ScriptedStream final : public ByteStream {
public:
    explicit ScriptedStream(std::string incoming) : m_incoming(std::move(incoming)) {}
    std::size_t read_some(char* out, std::size_t size) override {
        const auto n = std::min(size, m_incoming.size() - m_offset);
        std::memcpy(out, m_incoming.data() + m_offset, n);
        m_offset += n;
        return n;
    }
    bool write_all(const char* data, std::size_t size) override {
        written->append(data, size);
        return true;
    }
    void shutdown() override {}
    std::shared_ptr<std::string> written = std::make_shared<std::string>();

private:
    std::string m_incoming;
    std::size_t m_offset = 0;
};

class ScriptedTransport final : public Transport {
public:
    HttpResponse send(std::string_view, std::string_view, std::string_view, std::string_view) override { return {}; }
    std::unique_ptr<ByteStream> open_stream() override {
        std::lock_guard lock(m_mutex);
        auto stream = std::make_unique<ScriptedStream>(m_scripts.at(m_opened++));
        written.push_back(stream->written);
        return stream;
    }
    [[nodiscard]] std::string endpoint() const override { return "scripted"; }
    std::vector<std::string> m_scripts;
    std::vector<std::shared_ptr<std::string>> written;

private:
    std::mutex m_mutex;
    std::size_t m_opened = 0;
};

std::string frame(unsigned char opcode, const std::string& payload) {
    std::string out;
    out.push_back(static_cast<char>(0x80 | opcode));
    out.push_back(static_cast<char>(payload.size()));
    return out + payload;
}

std::string file_text(std::FILE* file) {
    std::fflush(file);
    std::rewind(file);
    std::string text;
    char buffer[256];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
    return text;
}

}  // namespace

TEST_CASE("stream_exec: upgrades each stream through the transport and copies stdout and stderr", "[exec-stream]") {
    const std::string upgraded = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";
    ScriptedTransport transport;
    transport.m_scripts = {upgraded + frame(0x8, ""),                                             // control
                           upgraded,                                                              // stdin
                           upgraded + frame(0x2, "hello ") + frame(0x2, "out") + frame(0x8, ""),  // stdout
                           upgraded + frame(0x2, "oops") + frame(0x8, "")};                       // stderr
    std::FILE* out = std::tmpfile();
    std::FILE* err = std::tmpfile();
    stream_exec(transport, "/1.0/operations/op1", ExecSecrets{"sc", "s0", "s1", "s2"}, ::fileno(out), ::fileno(err));
    CHECK(file_text(out) == "hello out");
    CHECK(file_text(err) == "oops");
    REQUIRE(transport.written.size() == 4);
    CHECK_THAT(*transport.written[0], Catch::StartsWith("GET /1.0/operations/op1/websocket?secret=sc HTTP/1.1\r\n"));
    CHECK_THAT(*transport.written[0], Catch::Contains("Upgrade: websocket\r\n"));
    // stdin is closed at once with a masked close frame (code 1000).
    CHECK_THAT(*transport.written[1], Catch::EndsWith(std::string("\x88\x82\0\0\0\0\x03\xe8", 8)));
    std::fclose(out);
    std::fclose(err);
}

TEST_CASE("stream_exec: a stream the daemon does not upgrade is an error naming the endpoint", "[exec-stream]") {
    ScriptedTransport transport;
    transport.m_scripts = {"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"};
    CHECK_THROWS_WITH(stream_exec(transport, "op1", ExecSecrets{"sc", "s0", "s1", "s2"}, -1, -1),
                      Catch::Contains("cannot open the exec stream /1.0/operations/op1/websocket at scripted: the "
                                      "daemon answered \"HTTP/1.1 403 Forbidden\""));
}
