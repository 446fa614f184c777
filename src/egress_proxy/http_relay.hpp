// Streaming one HTTP message from one stream to another through a fixed
// buffer (Boost.Beast's parser and serializer): plain-HTTP forwarding over TCP
// and terminated TLS use the same relay.
#pragma once

#include <utility>  // before Asio (awaitable.hpp needs std::exchange)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace agentctl::egress_proxy {

// A request whose head `parser` has read that expects `100 Continue` before
// it sends its body gets it from the proxy, which takes the expectation on
// itself (the field is not passed on), as a gateway does. Returns false when
// the client cannot be written to.
template <class ClientStream>
boost::asio::awaitable<bool> take_expectation(
    ClientStream& client, boost::beast::http::request_parser<boost::beast::http::buffer_body>& parser) {
    auto& request = parser.get();
    const bool expects_continue = boost::beast::iequals(request[boost::beast::http::field::expect], "100-continue");
    request.erase(boost::beast::http::field::expect);
    if (!expects_continue || parser.is_done()) co_return true;
    static constexpr std::string_view k_continue = "HTTP/1.1 100 Continue\r\n\r\n";
    boost::system::error_code ec;
    co_await boost::asio::async_write(client, boost::asio::buffer(k_continue),
                                      boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    co_return !ec;
}

// Reads the start of the body of a request whose head `parser` has read from
// `in` into `chunk`, until it is full or the body has ended (after
// take_expectation: a client waiting for `100 Continue` gets it). Returns how
// many bytes it holds (nullopt on an error); relay_message sends them first.
template <class InStream>
boost::asio::awaitable<std::optional<std::size_t>> read_body_start(
    InStream& in, boost::beast::flat_buffer& in_buffer,
    boost::beast::http::request_parser<boost::beast::http::buffer_body>& parser, std::span<char> chunk) {
    if (!co_await take_expectation(in, parser)) co_return std::nullopt;
    std::size_t filled = 0;
    boost::system::error_code ec;
    while (!parser.is_done() && filled < chunk.size()) {
        parser.get().body().data = chunk.data() + filled;
        parser.get().body().size = chunk.size() - filled;
        co_await boost::beast::http::async_read_some(in, in_buffer, parser,
                                                     boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        if (ec == boost::beast::http::error::need_buffer) ec = {};
        if (ec) co_return std::nullopt;
        filled = chunk.size() - parser.get().body().size;
    }
    co_return filled;
}

// Streams the rest of a message whose head `parser` has read from `in` to
// `out`, through `chunk` (the session's body buffer), beginning with the
// `read_ahead` bytes read_body_start left in `chunk`. Returns false on any
// error. Every chunk moved pushes `deadline` (the idle timeout) out again: a
// stream that keeps sending (server-sent events, a long upload) is never cut
// while data flows.
template <bool IsRequest, class InStream, class OutStream>
boost::asio::awaitable<bool> relay_message(
    InStream& in, boost::beast::flat_buffer& in_buffer,
    boost::beast::http::parser<IsRequest, boost::beast::http::buffer_body>& parser, OutStream& out,
    std::span<char> chunk, std::uint64_t& counter, std::chrono::steady_clock::time_point& deadline,
    std::chrono::steady_clock::duration idle, std::size_t read_ahead = 0) {
    boost::beast::http::serializer<IsRequest, boost::beast::http::buffer_body> serializer{parser.get()};
    boost::system::error_code ec;
    do {
        if (read_ahead > 0) {
            parser.get().body().data = chunk.data();
            parser.get().body().size = read_ahead;
            parser.get().body().more = !parser.is_done();
            read_ahead = 0;
        } else if (!parser.is_done()) {
            // read_some, not read: a slow stream (server-sent events) is passed
            // on as it arrives instead of waiting for the buffer to fill.
            parser.get().body().data = chunk.data();
            parser.get().body().size = chunk.size();
            co_await boost::beast::http::async_read_some(in, in_buffer, parser,
                                                         boost::asio::redirect_error(boost::asio::use_awaitable, ec));
            if (ec == boost::beast::http::error::need_buffer) ec = {};
            if (ec) co_return false;
            std::size_t got = chunk.size() - parser.get().body().size;
            parser.get().body().size = got;
            parser.get().body().data = got > 0 ? chunk.data() : nullptr;
            parser.get().body().more = !parser.is_done();
            if (got == 0 && !parser.is_done() && serializer.is_header_done()) continue;  // nothing new to send
        } else {
            parser.get().body().data = nullptr;
            parser.get().body().size = 0;
            parser.get().body().more = false;
        }
        auto n = co_await boost::beast::http::async_write(out, serializer,
                                                          boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        counter += n;
        deadline = std::chrono::steady_clock::now() + idle;
        if (ec == boost::beast::http::error::need_buffer) ec = {};
        if (ec) co_return false;
    } while (!parser.is_done() || !serializer.is_done());
    co_return true;
}

}  // namespace agentctl::egress_proxy
