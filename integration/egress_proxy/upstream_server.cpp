// Test origin servers for the egress proxy suite; run inside the network
// namespace the suite creates (`ip netns exec NS egress_proxy_upstream ...`).
//
//   http:ADDR:PORT     HTTP/1.1 keep-alive; answers `server=ADDR:PORT method=M target=T host=H body=N`
//                      (/bytes/N answers N bytes; /chunked/N the same, chunked)
//   echo:ADDR:PORT     echoes every byte back
//   backlog:ADDR:PORT  listens with backlog 0 and never accepts; the queue is
//                      filled once, so further SYNs are dropped (connect timeout)
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
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <cstdio>
#include <list>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::redirect_error;
using asio::use_awaitable;
using asio::ip::tcp;

namespace {

std::string endpoint_text(const tcp::endpoint& e) { return e.address().to_string() + ":" + std::to_string(e.port()); }

asio::awaitable<void> serve_http(tcp::socket socket, std::string name) {
    beast::flat_buffer buffer;
    boost::system::error_code ec;
    for (;;) {
        http::request<http::string_body> request;
        co_await http::async_read(socket, buffer, request, redirect_error(use_awaitable, ec));
        if (ec) co_return;
        std::string target(request.target());
        http::response<http::string_body> response{http::status::ok, request.version()};
        response.set(http::field::content_type, "text/plain");
        bool chunked = target.rfind("/chunked/", 0) == 0;
        if (target.rfind("/bytes/", 0) == 0 || chunked) {
            response.body().assign(std::stoul(target.substr(chunked ? 9 : 7)), 'x');
        } else {
            response.body() = "server=" + name + " method=" + std::string(request.method_string()) +
                              " target=" + target + " host=" + std::string(request[http::field::host]) +
                              " body=" + std::to_string(request.body().size()) +
                              " proxy-connection=" + std::string(request[http::field::proxy_connection]) + "\n";
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

asio::awaitable<void> serve_echo(tcp::socket socket) {
    std::vector<char> data(16384);
    boost::system::error_code ec;
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
        if (kind == "backlog") {
            acceptor.listen(0);
            // Fill the accept queue so later SYNs are dropped, never answered.
            for (int k = 0; k < 2; ++k) {
                tcp::socket& s = fillers.emplace_back(io);
                s.open(endpoint.protocol());
                s.native_non_blocking(true);
                // Raw connect(2): completes in the kernel's queue without anyone accepting.
                ::connect(s.native_handle(), endpoint.data(), static_cast<socklen_t>(endpoint.size()));
            }
            parked.push_back(std::move(acceptor));
            continue;
        }
        acceptor.listen(4096);
        asio::co_spawn(io, accept_loop(std::move(acceptor), kind), asio::detached);
    }
    asio::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&](const boost::system::error_code&, int) { io.stop(); });
    std::printf("ready\n");
    std::fflush(stdout);
    io.run();
    return 0;
}
