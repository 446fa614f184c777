// Plain HTTP forward proxying: each request on a client connection is decided
// on its own; its head is rewritten to origin form without hop-by-hop fields,
// and bodies (length-delimited, chunked or close-delimited) stream through a
// fixed buffer with Boost.Beast's parser and serializer.
#include <utility>  // before Asio (awaitable.hpp needs std::exchange)

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

#include <limits>
#include <span>
#include <string>
#include <vector>

#include "egress_proxy/http_relay.hpp"
#include "egress_proxy/session.hpp"

namespace agentctl::egress_proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

using asio::redirect_error;
using asio::use_awaitable;

// Removes the fields that describe one hop (RFC 9110 7.6.1), including every
// field the Connection header names.
template <class Fields>
void strip_hop_by_hop(Fields& fields) {
    std::vector<std::string> named;
    for (auto token : http::token_list(fields[http::field::connection])) named.emplace_back(token);
    for (const auto& name : named) fields.erase(name);
    for (auto field : {http::field::connection, http::field::keep_alive, http::field::proxy_connection,
                       http::field::proxy_authorization, http::field::proxy_authenticate, http::field::te,
                       http::field::trailer, http::field::upgrade}) {
        fields.erase(field);
    }
}

std::string host_field(const RequestTarget& target) {
    std::string host = target.host.find(':') != std::string::npos ? "[" + target.host + "]" : target.host;
    if (target.port != 80) host += ":" + std::to_string(target.port);
    return host;
}

}  // namespace

asio::awaitable<bool> Session::handle_forward(std::unique_ptr<RequestParser> parser, const RequestTarget& target,
                                              std::shared_ptr<const PolicySnapshot> snapshot,
                                              std::optional<policy::Decision> decision) {
    auto self = shared_from_this();
    auto& request = parser->get();
    std::string method(request.method_string());
    bool client_keep_alive = request.keep_alive();
    if (const auto& intercept = m_context.shared.intercept) {
        // Plain HTTP never carries a secret: a placeholder in it is refused.
        const auto request_target = request.target();
        const auto injection = intercept->secrets()->inject(
            "", std::string_view(request_target.data(), request_target.size()), request.base());
        if (injection.misplaced) {
            LogLine entry = decision_line(method);
            entry.add("host", target.host).add("port", target.port).add("secret", injection.misplaced->secret);
            const Refusal refusal{403, ProxyReason::SecretMisplaced,
                                  "the placeholder of secret " + injection.misplaced->secret + " may not go to " +
                                      target.host + " over plain HTTP (" + injection.misplaced->where + ")"};
            co_return co_await refuse(entry, refusal, target);
        }
    }
    // One body buffer per connection, taken on its first plain-HTTP request:
    // in the coroutine frame it made every request allocate and free 32 KiB.
    if (!m_body_chunk) m_body_chunk = std::make_unique_for_overwrite<char[]>(k_body_chunk);
    const std::span<char> chunk(m_body_chunk.get(), k_body_chunk);
    std::size_t body_start = 0;
    if (const auto& intercept = m_context.shared.intercept; intercept && !parser->is_done()) {
        // Nor in the start of its body.
        set_deadline(m_context.limits.idle_timeout);
        const auto read = co_await read_body_start(m_client, m_buffer, *parser, chunk.first(k_screened_body_bytes));
        if (!read) co_return false;
        body_start = *read;
        if (const auto misplaced =
                intercept->secrets()->misplaced_in_body("", std::string_view(chunk.data(), body_start))) {
            LogLine entry = decision_line(method);
            entry.add("host", target.host).add("port", target.port).add("secret", misplaced->secret);
            const Refusal refusal{403, ProxyReason::SecretMisplaced,
                                  "the placeholder of secret " + misplaced->secret + " may not go to " + target.host +
                                      " over plain HTTP (" + misplaced->where + ")"};
            co_return co_await refuse(entry, refusal, target);
        }
    }
    if (!co_await decide_and_connect(method, target, std::move(snapshot), std::move(decision))) co_return false;

    m_phase = Phase::Forwarding;
    set_deadline(m_context.limits.idle_timeout);
    // An Upgrade (WebSocket, ...) is passed on; a 101 answer turns the
    // connection into a tunnel to the destination decided above.
    std::string upgrade;
    for (auto token : http::token_list(request[http::field::connection])) {
        if (beast::iequals(token, "upgrade")) upgrade = std::string(request[http::field::upgrade]);
    }
    strip_hop_by_hop(request);
    request.target(target.origin_form);
    request.set(http::field::host, host_field(target));
    request.keep_alive(true);
    if (!upgrade.empty()) {
        request.set(http::field::connection, "Upgrade");
        request.set(http::field::upgrade, upgrade);
    }
    boost::system::error_code ec;
    if (!co_await take_expectation(m_client, *parser)) co_return false;
    const auto idle = m_context.limits.idle_timeout;
    if (!co_await relay_message(m_client, m_buffer, *parser, m_upstream, chunk, m_bytes_up, m_deadline, idle,
                                body_start)) {
        close_upstream("request relay failed");
        co_return false;
    }
    bool head_request = request.method() == http::verb::head;
    parser.reset();
    // Beast reads as much as the buffer's free capacity (at least 512 bytes): an
    // empty buffer would take a response in 512-byte reads and pass its body on
    // in as many writes.
    if (m_up_buffer.capacity() < k_body_chunk) m_up_buffer.reserve(k_body_chunk);

    for (;;) {
        http::response_parser<http::buffer_body> response_parser;
        response_parser.header_limit(64 * 1024);
        response_parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // not boost::none: Beast 1.74 compares
                                                                                // none as less than any length
        if (head_request) response_parser.skip(true);
        co_await http::async_read_header(m_upstream, m_up_buffer, response_parser, redirect_error(use_awaitable, ec));
        if (ec) {
            bool answered_nothing = m_client.is_open();
            close_upstream("no response");
            if (answered_nothing && !m_timed_out) {
                const Refusal refusal{502, ProxyReason::BadUpstreamResponse,
                                      "the destination did not send an HTTP response: " + ec.message()};
                co_await send_refusal(refusal, target.host, target.port);
            }
            co_return false;
        }
        auto& response = response_parser.get();
        unsigned status = response.result_int();
        if (status == 101) {
            std::string accepted(response[http::field::upgrade]);
            if (upgrade.empty() || accepted.empty()) {
                close_upstream("unrequested upgrade");  // a 101 nobody asked for is a protocol violation
                co_return false;
            }
            strip_hop_by_hop(response);
            response.set(http::field::connection, "Upgrade");
            response.set(http::field::upgrade, accepted);
            if (!co_await relay_message(m_upstream, m_up_buffer, response_parser, m_client, chunk, m_bytes_down,
                                        m_deadline, idle)) {
                close_upstream("response relay failed");
                co_return false;
            }
            // Bytes either side sent right behind the heads go first, then the tunnel.
            if (m_up_buffer.size() > 0) {
                auto n = co_await asio::async_write(m_client, m_up_buffer.data(), redirect_error(use_awaitable, ec));
                m_bytes_down += n;
                m_up_buffer.consume(n);
            }
            if (!ec && m_buffer.size() > 0) {
                auto n = co_await asio::async_write(m_upstream, m_buffer.data(), redirect_error(use_awaitable, ec));
                m_bytes_up += n;
                m_buffer.consume(n);
            }
            if (ec) {
                close_upstream("upgrade relay failed");
                co_return false;
            }
            m_buffer = beast::flat_buffer();
            m_up_buffer = beast::flat_buffer();
            m_upgraded = true;
            start_tunnel();
            co_return false;
        }
        bool interim = status >= 100 && status < 200;
        bool upstream_keep_alive = response.keep_alive();
        strip_hop_by_hop(response);
        bool keep = interim || (client_keep_alive && upstream_keep_alive);
        response.keep_alive(keep);
        if (!co_await relay_message(m_upstream, m_up_buffer, response_parser, m_client, chunk, m_bytes_down, m_deadline,
                                    idle)) {
            close_upstream("response relay failed");
            co_return false;
        }
        if (interim) continue;
        if (!upstream_keep_alive) close_upstream("upstream closes");
        clear_deadline();
        co_return keep;
    }
}

}  // namespace agentctl::egress_proxy
