// Test origin servers for the egress proxy suite; run inside the network
// namespace the suite creates (`ip netns exec NS egress_proxy_upstream ...`).
//
//   http:ADDR:PORT     HTTP/1.1 keep-alive; answers `server=ADDR:PORT method=M target=T host=H body=N`
//                      (request bodies are streamed and counted, never held; heads up to 64 KiB)
//                      /bytes/N answers N bytes; /chunked/N the same, chunked;
//                      /events/N/MS sends N server-sent events MS ms apart (chunked), then ends;
//                      /quiet sends one event and then nothing until the connection closes;
//                      a WebSocket upgrade (any target) echoes every message back (Boost.Beast)
//   echo:ADDR:PORT     echoes every byte back
//   greet:ADDR:PORT    speaks first, as SMTP and SSH servers do: sends `220 ADDR:PORT ready` at
//                      once, then echoes
//   sink:ADDR:PORT     accepts and never reads (nor closes): what a client sends piles up
//   drain:ADDR:PORT    reads until the client's FIN, then answers `received N bytes` and closes
//   backlog:ADDR:PORT  listens with backlog 0 and never accepts; the queue is
//                      filled once, so further SYNs are dropped (connect timeout)
//   late:ADDR:PORT     the same until SIGUSR1, then accepts and echoes: a SYN
//                      dropped before is answered when the client sends it again
// Prints `ready` on stdout once every listener is up; exits on SIGTERM.
#include <utility>

#include <sys/resource.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket.hpp>

#include <algorithm>
#include <iterator>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <list>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using asio::redirect_error;
using asio::use_awaitable;
using asio::ip::tcp;

namespace {

std::string endpoint_text(const tcp::endpoint& e) { return e.address().to_string() + ":" + std::to_string(e.port()); }

std::string to_hex(std::size_t n) {
    char text[32];
    std::snprintf(text, sizeof text, "%zx", n);
    return text;
}

asio::awaitable<void> serve_websocket(tcp::socket socket, http::request<http::empty_body> request) {
    websocket::stream<tcp::socket> ws(std::move(socket));
    boost::system::error_code ec;
    co_await ws.async_accept(request, redirect_error(use_awaitable, ec));
    if (ec) co_return;
    beast::flat_buffer message;
    for (;;) {
        co_await ws.async_read(message, redirect_error(use_awaitable, ec));
        if (ec) co_return;
        ws.text(ws.got_text());
        co_await ws.async_write(message.data(), redirect_error(use_awaitable, ec));
        if (ec) co_return;
        message.consume(message.size());
    }
}

// Server-sent events: `count` events `gap` apart, chunked; count 0 sends one and then waits for the close.
asio::awaitable<void> serve_events(tcp::socket& socket, unsigned count, std::chrono::milliseconds gap) {
    boost::system::error_code ec;
    std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    co_await asio::async_write(socket, asio::buffer(head), redirect_error(use_awaitable, ec));
    asio::steady_timer timer(socket.get_executor());
    for (unsigned i = 0; i < std::max(count, 1u) && !ec; ++i) {
        if (i > 0) {
            timer.expires_after(gap);
            co_await timer.async_wait(redirect_error(use_awaitable, ec));
        }
        std::string event = "data: event " + std::to_string(i) + "\n\n";
        std::string chunk = to_hex(event.size()) + "\r\n" + event + "\r\n";
        co_await asio::async_write(socket, asio::buffer(chunk), redirect_error(use_awaitable, ec));
    }
    if (count == 0) {
        char byte = 0;  // quiet: nothing more until the other side closes
        co_await socket.async_read_some(asio::buffer(&byte, 1), redirect_error(use_awaitable, ec));
        co_return;
    }
    static constexpr std::string_view k_last = "0\r\n\r\n";
    co_await asio::async_write(socket, asio::buffer(k_last), redirect_error(use_awaitable, ec));
}

asio::awaitable<void> serve_http(tcp::socket socket, std::string name) {
    beast::flat_buffer buffer;
    boost::system::error_code ec;
    std::vector<char> chunk(64 * 1024);
    for (;;) {
        http::request_parser<http::buffer_body> parser;
        parser.header_limit(64 * 1024);
        parser.body_limit(std::numeric_limits<std::uint64_t>::max());
        co_await http::async_read_header(socket, buffer, parser, redirect_error(use_awaitable, ec));
        if (ec) co_return;
        if (websocket::is_upgrade(parser.get())) {
            http::request<http::empty_body> head(parser.get().base());
            co_await serve_websocket(std::move(socket), std::move(head));
            co_return;
        }
        std::uint64_t body_bytes = 0;
        while (!parser.is_done()) {
            parser.get().body().data = chunk.data();
            parser.get().body().size = chunk.size();
            co_await http::async_read(socket, buffer, parser, redirect_error(use_awaitable, ec));
            if (ec == http::error::need_buffer) ec = {};
            if (ec) co_return;
            body_bytes += chunk.size() - parser.get().body().size;
        }
        auto& request = parser.get();
        std::string target(request.target());
        if (target.rfind("/events/", 0) == 0 || target == "/quiet") {
            unsigned count = 0;
            unsigned gap = 0;
            if (target != "/quiet") std::sscanf(target.c_str(), "/events/%u/%u", &count, &gap);
            co_await serve_events(socket, count, std::chrono::milliseconds(gap));
            co_return;
        }
        http::response<http::string_body> response{http::status::ok, request.version()};
        response.set(http::field::content_type, "text/plain");
        bool chunked = target.rfind("/chunked/", 0) == 0;
        if (target.rfind("/bytes/", 0) == 0 || chunked) {
            response.body().assign(std::stoul(target.substr(chunked ? 9 : 7)), 'x');
        } else {
            response.body() = "server=" + name + " method=" + std::string(request.method_string()) +
                              " target=" + target + " host=" + std::string(request[http::field::host]) +
                              " body=" + std::to_string(body_bytes) +
                              " proxy-connection=" + std::string(request[http::field::proxy_connection]) +
                              " expect=" + std::string(request[http::field::expect]) +
                              " fields=" + std::to_string(std::distance(request.begin(), request.end())) + "\n";
        }
        response.keep_alive(request.keep_alive());
        if (chunked) {
            response.chunked(true);
        } else {
            response.prepare_payload();
        }
        co_await http::async_write(socket, response, redirect_error(use_awaitable, ec));
        if (ec || !request.keep_alive()) co_return;
    }
}

asio::awaitable<void> serve_drain(tcp::socket socket) {
    std::vector<char> data(65536);
    std::uint64_t total = 0;
    boost::system::error_code ec;
    for (;;) {
        auto n = co_await socket.async_read_some(asio::buffer(data), redirect_error(use_awaitable, ec));
        total += n;
        if (ec) break;
    }
    if (ec != asio::error::eof) co_return;
    std::string answer = "received " + std::to_string(total) + " bytes\n";
    co_await asio::async_write(socket, asio::buffer(answer), redirect_error(use_awaitable, ec));
    socket.shutdown(tcp::socket::shutdown_send, ec);
}

// Connections a sink holds, unread, until the server exits (never destroyed:
// they would outlive the io_context in main).
std::list<tcp::socket>& sunk() {
    static auto* sockets = new std::list<tcp::socket>;
    return *sockets;
}

asio::awaitable<void> serve_echo(tcp::socket socket, std::string greeting = {}) {
    std::vector<char> data(16384);
    boost::system::error_code ec;
    if (!greeting.empty()) {
        co_await asio::async_write(socket, asio::buffer(greeting), redirect_error(use_awaitable, ec));
        if (ec) co_return;
    }
    for (;;) {
        auto n = co_await socket.async_read_some(asio::buffer(data), redirect_error(use_awaitable, ec));
        if (ec) co_return;
        co_await asio::async_write(socket, asio::buffer(data.data(), n), redirect_error(use_awaitable, ec));
        if (ec) co_return;
    }
}

asio::awaitable<void> accept_loop(tcp::acceptor acceptor, std::string kind) {
    std::string name = endpoint_text(acceptor.local_endpoint());
    for (;;) {
        boost::system::error_code ec;
        tcp::socket socket(acceptor.get_executor());
        co_await acceptor.async_accept(socket, redirect_error(use_awaitable, ec));
        if (ec) {
            if (ec == asio::error::operation_aborted) co_return;
            continue;
        }
        socket.set_option(tcp::no_delay(true), ec);
        if (kind == "http") {
            asio::co_spawn(acceptor.get_executor(), serve_http(std::move(socket), name), asio::detached);
        } else if (kind == "drain") {
            asio::co_spawn(acceptor.get_executor(), serve_drain(std::move(socket)), asio::detached);
        } else if (kind == "sink") {
            sunk().push_back(std::move(socket));
        } else if (kind == "greet") {
            asio::co_spawn(acceptor.get_executor(), serve_echo(std::move(socket), "220 " + name + " ready\r\n"),
                           asio::detached);
        } else {
            asio::co_spawn(acceptor.get_executor(), serve_echo(std::move(socket)), asio::detached);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);

    asio::io_context io(1);
    std::list<tcp::socket> fillers;
    std::list<tcp::acceptor> parked;
    std::list<tcp::acceptor> late;
    for (int i = 1; i < argc; ++i) {
        std::string spec = argv[i];
        auto first = spec.find(':');
        auto last = spec.rfind(':');
        std::string kind = spec.substr(0, first);
        tcp::endpoint endpoint(asio::ip::make_address(spec.substr(first + 1, last - first - 1)),
                               static_cast<unsigned short>(std::stoi(spec.substr(last + 1))));
        tcp::acceptor acceptor(io);
        acceptor.open(endpoint.protocol());
        acceptor.set_option(tcp::acceptor::reuse_address(true));
        acceptor.bind(endpoint);
        if (kind == "backlog" || kind == "late") {
            acceptor.listen(0);
            // Fill the accept queue so later SYNs are dropped, never answered.
            for (int k = 0; k < 2; ++k) {
                tcp::socket& s = fillers.emplace_back(io);
                s.open(endpoint.protocol());
                s.native_non_blocking(true);
                // Raw connect(2): completes in the kernel's queue without anyone accepting.
                ::connect(s.native_handle(), endpoint.data(), static_cast<socklen_t>(endpoint.size()));
            }
            (kind == "late" ? late : parked).push_back(std::move(acceptor));
            continue;
        }
        acceptor.listen(4096);
        asio::co_spawn(io, accept_loop(std::move(acceptor), kind), asio::detached);
    }
    asio::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&](const boost::system::error_code&, int) { io.stop(); });
    asio::signal_set open_late(io, SIGUSR1);
    open_late.async_wait([&](const boost::system::error_code& ec, int) {
        if (ec) return;
        for (auto& acceptor : late) asio::co_spawn(io, accept_loop(std::move(acceptor), "echo"), asio::detached);
        late.clear();
    });
    std::printf("ready\n");
    std::fflush(stdout);
    io.run();
    return 0;
}
