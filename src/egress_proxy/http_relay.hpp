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

#include <chrono>
#include <cstdint>
#include <span>

namespace agentctl::egress_proxy {

// Streams the rest of a message whose head `parser` has read from `in` to
// `out`, through `chunk` (the session's body buffer). Returns false on any
// error. Every chunk moved pushes `deadline` (the idle timeout) out again: a
// stream that keeps sending (server-sent events, a long upload) is never cut
// while data flows.
template <bool IsRequest, class InStream, class OutStream>
boost::asio::awaitable<bool> relay_message(
    InStream& in, boost::beast::flat_buffer& in_buffer,
    boost::beast::http::parser<IsRequest, boost::beast::http::buffer_body>& parser, OutStream& out,
    std::span<char> chunk, std::uint64_t& counter, std::chrono::steady_clock::time_point& deadline,
    std::chrono::steady_clock::duration idle) {
    boost::beast::http::serializer<IsRequest, boost::beast::http::buffer_body> serializer{parser.get()};
    boost::system::error_code ec;
    do {
        if (!parser.is_done()) {
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
