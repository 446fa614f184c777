// The pure parts of exec streaming: the operation's websocket secrets and
// their request targets (Incus client/incus_instances.go, ExecInstance and
// GetOperationWebsocket); and stream_exec over a transport's streams (any
// transport: the unix socket or TLS), with scripted server bytes.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "agentctl/error.hpp"
#include "provider/incus/client/exec_stream.hpp"
#include "provider/incus/client/payloads.hpp"

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
        // Holds back what comes after the upgrade until `gate` says so (the
        // command's output ends only after it has read its stdin).
        if (gate && m_offset > 0) {
            for (int i = 0; i < 500 && !gate(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        auto n = std::min(size, m_incoming.size() - m_offset);
        if (gate && m_offset == 0) n = std::min(n, m_incoming.find("\r\n\r\n") + 4);  // the upgrade alone
        std::memcpy(out, m_incoming.data() + m_offset, n);
        m_offset += n;
        return n;
    }
    bool write_all(const char* data, std::size_t size) override {
        written->append(data, size);
        return true;
    }
    void shutdown() override {}
    std::function<bool()> gate;
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
        auto stream = std::make_unique<ScriptedStream>(m_scripts.at(m_opened));
        if (m_opened == 2 && gate_stdout) stream->gate = [this] { return gate_stdout(*written.at(1)); };
        ++m_opened;
        written.push_back(stream->written);
        return stream;
    }
    [[nodiscard]] std::string endpoint() const override { return "scripted"; }
    std::vector<std::string> m_scripts;
    std::vector<std::shared_ptr<std::string>> written;
    // When set, stdout's frames wait until it is true of what stdin's connection got.
    std::function<bool(const std::string&)> gate_stdout;

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
    stream_exec(transport, "/1.0/operations/op1", ExecSecrets{"sc", "s0", "s1", "s2"}, -1, ::fileno(out),
                ::fileno(err));
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
    CHECK_THROWS_WITH(stream_exec(transport, "op1", ExecSecrets{"sc", "s0", "s1", "s2"}, -1, -1, -1),
                      Catch::Contains("cannot open the exec stream /1.0/operations/op1/websocket at scripted: the "
                                      "daemon answered \"HTTP/1.1 403 Forbidden\""));
}

TEST_CASE("stream_exec: stdin goes to the command as binary frames, then a close frame", "[exec-stream]") {
    const std::string upgraded = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";
    const std::string close_frame("\x88\x82\0\0\0\0\x03\xe8", 8);
    ScriptedTransport transport;
    transport.m_scripts = {upgraded + frame(0x8, ""), upgraded, upgraded + frame(0x8, ""), upgraded + frame(0x8, "")};
    transport.gate_stdout = [&](const std::string& got) { return got.ends_with(close_frame); };
    // Binary bytes (a NUL, 0xff, no newline) and more than one 64 KiB read.
    std::string data("a\0b\xff", 4);
    data += std::string(70000, 'x');
    std::FILE* in = std::tmpfile();
    std::fwrite(data.data(), 1, data.size(), in);
    std::fflush(in);
    std::rewind(in);
    stream_exec(transport, "op1", ExecSecrets{"sc", "s0", "s1", "s2"}, ::fileno(in), -1, -1);
    std::fclose(in);
    REQUIRE(transport.written.size() == 4);
    const auto& got = *transport.written[1];
    const auto body = got.substr(got.find("\r\n\r\n") + 4);
    // First frame: 65536 bytes (a 64-bit length), masked with a zero key.
    const std::string first_header("\x82\xff\0\0\0\0\0\x01\0\0\0\0\0\0", 14);
    REQUIRE(body.size() == first_header.size() + 65536 + 8 + (data.size() - 65536) + close_frame.size());
    CHECK(body.substr(0, first_header.size()) == first_header);
    CHECK(body.substr(first_header.size(), 65536) == data.substr(0, 65536));
    // Second frame: the rest (a 16-bit length).
    const auto second = body.substr(first_header.size() + 65536);
    const auto rest = data.size() - 65536;
    CHECK(second.substr(0, 4) ==
          std::string{'\x82', '\xfe', static_cast<char>(rest >> 8), static_cast<char>(rest & 0xff)});
    CHECK(second.substr(8, rest) == data.substr(65536));
    CHECK(body.ends_with(close_frame));
}
