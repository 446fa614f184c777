// The real Transport: HTTP/1.1 over the Incus unix socket with Boost.Beast.
// One connection per request (the daemon closes idle ones anyway); the whole
// exchange is bounded by a deadline so a hung daemon cannot hang agentctl.
#include <utility>  // must precede Asio (std::exchange in awaitable.hpp on g++ 12)

#include <chrono>

#include <boost/asio/connect.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agentctl/error.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/client/http_message.hpp"

namespace agentctl::provider::incus {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using Socket = asio::local::stream_protocol::socket;

// A plain connection to the socket, for websockets.
class UnixStream final : public ByteStream {
public:
    UnixStream() : m_socket(m_io) {}
    Socket& socket() { return m_socket; }

    std::size_t read_some(char* out, std::size_t size) override { return read_some_from(m_socket, out, size); }
    bool write_all(const char* data, std::size_t size) override { return write_all_to(m_socket, data, size); }
    void shutdown() override {
        beast::error_code ignored;
        m_socket.shutdown(Socket::shutdown_both, ignored);
    }

private:
    asio::io_context m_io;
    Socket m_socket;
};

class UnixTransport final : public Transport {
public:
    UnixTransport(std::string path, int timeout_seconds) : m_path(std::move(path)), m_timeout(timeout_seconds) {}

    // One line per request at log level info (-v): method, path, status, time.
    HttpResponse send(std::string_view method, std::string_view target, std::string_view body,
                      std::string_view content_type) override {
        return logged_exchange({}, method, target, [&] { return exchange(method, target, body, content_type); });
    }

    std::unique_ptr<ByteStream> open_stream() override {
        auto stream = std::make_unique<UnixStream>();
        beast::error_code ec;
        stream->socket().connect(asio::local::stream_protocol::endpoint(m_path), ec);
        if (ec) {
            throw Error(fmt::format("cannot reach the Incus daemon at {}: {}", m_path, ec.message()), connect_hint(ec));
        }
        return stream;
    }

    [[nodiscard]] std::string endpoint() const override { return m_path; }

private:
    HttpResponse exchange(std::string_view method, std::string_view target, std::string_view body,
                          std::string_view content_type) {
        asio::io_context io;
        beast::basic_stream<asio::local::stream_protocol> stream(io);
        stream.expires_after(std::chrono::seconds(m_timeout));

        beast::error_code ec;
        stream.socket().connect(asio::local::stream_protocol::endpoint(m_path), ec);
        if (ec) {
            throw Error(fmt::format("cannot reach the Incus daemon at {}: {}", m_path, ec.message()), connect_hint(ec));
        }

        auto request = build_request(method, target, body, content_type, "incus");

        bool ok = true;
        std::string phase;
        http::response_parser<http::string_body> parser;
        allow_large_bodies(parser);
        beast::flat_buffer buffer;
        http::async_write(stream, request, [&](beast::error_code e, std::size_t) {
            if (e) {
                ok = false, ec = e, phase = "sending";
                return;
            }
            http::async_read(stream, buffer, parser, [&](beast::error_code e2, std::size_t) {
                if (e2) ok = false, ec = e2, phase = "reading the answer to";
            });
        });
        io.run();
        if (!ok) {
            throw Error(fmt::format("the Incus daemon at {} failed while {} {} {}: {}", m_path, phase, method, target,
                                    ec == beast::error::timeout ? "timed out" : ec.message()),
                        "check that incusd is running and healthy (its log: /var/log/incus/)");
        }
        stream.socket().shutdown(Socket::shutdown_both, ec);

        return to_response(parser.release());
    }

    std::string connect_hint(const beast::error_code& ec) const {
        if (ec == asio::error::access_denied) {
            return "your user may not use Incus: join the incus-admin group (then log in again) or run as root";
        }
        return "start the Incus daemon (on a machine without systemd: scripts/incus/up.sh), "
               "or point $INCUS_SOCKET at its socket";
    }

    std::string m_path;
    int m_timeout;
};

}  // namespace

std::unique_ptr<Transport> make_unix_transport(std::string socket_path, int timeout_seconds) {
    return std::make_unique<UnixTransport>(std::move(socket_path), timeout_seconds);
}

}  // namespace agentctl::provider::incus
