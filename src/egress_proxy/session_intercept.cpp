// TLS termination for the hosts a sandbox's secrets are bound to: the sandbox
// gets a certificate of its own CA for the host it asked for, the proxy opens
// TLS to the real host (checked against the trust store, by name), and passes
// request after request (HTTP/1.1, keep-alive, bodies streamed both ways,
// WebSocket upgrades), each with the secrets' placeholders replaced in the
// headers they are bound to. A placeholder anywhere else (the start of the
// body included, unless the secret is bound to this host) is refused (403).
#include <utility>  // before Asio (awaitable.hpp needs std::exchange)

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <array>
#include <limits>

#include <fmt/format.h>

#include "egress_proxy/http_relay.hpp"
#include "egress_proxy/request_screen.hpp"
#include "egress_proxy/session.hpp"

namespace agentctl::egress_proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;

namespace {

using asio::redirect_error;
using asio::use_awaitable;
using TlsStream = ssl::stream<tcp::socket&>;

// Bytes both ways between two TLS streams (after a 101), until either side ends.
asio::awaitable<void> copy_one_way(TlsStream& from, TlsStream& to, std::uint64_t& counter, Clock::time_point& deadline,
                                   Clock::duration idle) {
    std::array<char, 16 * 1024> buffer{};
    boost::system::error_code ec;
    for (;;) {
        auto n = co_await from.async_read_some(asio::buffer(buffer), redirect_error(use_awaitable, ec));
        if (ec) break;
        co_await asio::async_write(to, asio::buffer(buffer.data(), n), redirect_error(use_awaitable, ec));
        if (ec) break;
        counter += n;
        deadline = Clock::now() + idle;
    }
    boost::system::error_code ignored;
    from.next_layer().close(ignored);
    to.next_layer().close(ignored);
}

}  // namespace

asio::awaitable<void> Session::intercept_tls(std::shared_ptr<TlsIntercept> intercept, std::string host) {
    auto self = shared_from_this();
    set_nodelay(m_upstream);
    boost::system::error_code ec;
    TlsStream sandbox(m_client, intercept->sandbox_side());
    TlsStream origin(m_upstream, intercept->origin_side());
    auto finish = [&](const char* why) {
        close_upstream(why);
        close();
    };
    if (!intercept->leaves().present(sandbox.native_handle(), host)) {
        finish("no certificate for the sandbox");
        co_return;
    }
    // The handshake with the sandbox first (bytes it sent behind its CONNECT
    // head are its ClientHello), so that a refusal can reach it as HTTP.
    set_deadline(m_context.limits.header_timeout);
    co_await sandbox.async_handshake(ssl::stream_base::server, m_buffer.data(), redirect_error(use_awaitable, ec));
    m_buffer.consume(m_buffer.size());
    if (ec) {
        log_rejected_request("CONNECT", {400, ProxyReason::MalformedRequest, "TLS with the sandbox: " + ec.message()},
                             host, 443);
        finish("sandbox TLS failed");
        co_return;
    }
    SSL_set_tlsext_host_name(origin.native_handle(), host.c_str());
    SSL_set1_host(origin.native_handle(), host.c_str());
    set_deadline(m_context.limits.connect_timeout);
    co_await origin.async_handshake(ssl::stream_base::client, redirect_error(use_awaitable, ec));
    if (ec) {
        const auto verify = SSL_get_verify_result(origin.native_handle());
        const bool untrusted = verify != X509_V_OK;
        const Refusal refusal{
            502, untrusted ? ProxyReason::UpstreamUntrusted : ProxyReason::ConnectFailed,
            fmt::format("TLS with {}: {}", host, untrusted ? X509_verify_cert_error_string(verify) : ec.message())};
        log_rejected_request("CONNECT", refusal, host, 443);
        const auto response = refusal_response(refusal, host, 443, m_context.shared.sandbox_name);
        co_await asio::async_write(sandbox, asio::buffer(response), redirect_error(use_awaitable, ec));
        finish("host TLS failed");
        co_return;
    }

    const auto idle = m_context.limits.idle_timeout;
    if (!m_body_chunk) m_body_chunk = std::make_unique_for_overwrite<char[]>(k_body_chunk);
    const std::span<char> chunk(m_body_chunk.get(), k_body_chunk);
    beast::flat_buffer from_origin;
    from_origin.reserve(k_body_chunk);
    for (;;) {
        m_phase = Phase::Header;
        set_deadline(idle);
        RequestParser parser;
        configure_request_parser(parser, m_context.limits.max_header_bytes);
        co_await http::async_read_header(sandbox, m_buffer, parser, redirect_error(use_awaitable, ec));
        if (ec) break;
        auto& request = parser.get();
        const std::string method(request.method_string());
        const bool wants_upgrade = beast::websocket::is_upgrade(request);
        const bool head_request = request.method() == http::verb::head;
        LogLine entry = decision_line(method);
        entry.add("host", host).add("port", 443).add("terminated", true);
        const auto target = request.target();
        const auto secrets = intercept->secrets();
        auto injection = secrets->inject(host, std::string_view(target.data(), target.size()), request.base());
        // The start of the body is read before anything goes to the host.
        std::size_t body_start = 0;
        if (!injection.misplaced && !parser.is_done()) {
            set_deadline(idle);
            const auto read = co_await read_body_start(sandbox, m_buffer, parser, chunk.first(k_screened_body_bytes));
            if (!read) break;
            body_start = *read;
            injection.misplaced = secrets->misplaced_in_body(host, std::string_view(chunk.data(), body_start));
        }
        if (injection.misplaced) {
            const Refusal refusal{403, ProxyReason::SecretMisplaced,
                                  fmt::format("the placeholder of secret {} may not go to {} ({})",
                                              injection.misplaced->secret, host, injection.misplaced->where)};
            entry.add("secret", injection.misplaced->secret);
            add_refusal(entry, refusal);
            m_context.shared.refusal_log.write(entry, to_string(refusal.reason));
            const auto response = refusal_response(refusal, host, 443, m_context.shared.sandbox_name);
            co_await asio::async_write(sandbox, asio::buffer(response), redirect_error(use_awaitable, ec));
            break;
        }
        if (!injection.injected.empty()) entry.add("secrets", fmt::format("{}", fmt::join(injection.injected, ",")));
        entry.add("decision", "allow").add("status", 200);
        log_allowed(entry);

        m_phase = Phase::Forwarding;
        set_deadline(idle);
        if (!co_await relay_message(sandbox, m_buffer, parser, origin, chunk, m_bytes_up, m_deadline, idle, body_start))
            break;
        bool keep = request.keep_alive();
        bool upgraded = false;
        for (;;) {
            http::response_parser<http::buffer_body> response_parser;
            response_parser.header_limit(64 * 1024);
            response_parser.body_limit(std::numeric_limits<std::uint64_t>::max());
            if (head_request) response_parser.skip(true);
            co_await http::async_read_header(origin, from_origin, response_parser, redirect_error(use_awaitable, ec));
            if (ec) {
                keep = false;
                break;
            }
            const unsigned status = response_parser.get().result_int();
            const bool interim = status >= 100 && status < 200 && status != 101;
            keep = keep && response_parser.get().keep_alive();
            if (!co_await relay_message(origin, from_origin, response_parser, sandbox, chunk, m_bytes_down, m_deadline,
                                        idle)) {
                keep = false;
                break;
            }
            if (status == 101 && wants_upgrade) upgraded = true;
            if (!interim) break;
        }
        if (upgraded) {
            // Bytes either side sent right behind the heads go first, then both ways at once.
            if (from_origin.size() > 0) {
                m_bytes_down +=
                    co_await asio::async_write(sandbox, from_origin.data(), redirect_error(use_awaitable, ec));
                from_origin.consume(from_origin.size());
            }
            if (!ec && m_buffer.size() > 0) {
                m_bytes_up += co_await asio::async_write(origin, m_buffer.data(), redirect_error(use_awaitable, ec));
                m_buffer.consume(m_buffer.size());
            }
            if (!ec) {
                m_phase = Phase::Tunnel;
                // One direction on a coroutine of its own; this one waits for both.
                bool down_done = false;
                asio::steady_timer both_done(m_context.io, Clock::time_point::max());
                asio::co_spawn(m_context.io, copy_one_way(origin, sandbox, m_bytes_down, m_deadline, idle),
                               [&down_done, &both_done](const std::exception_ptr&) {
                                   down_done = true;
                                   both_done.cancel();
                               });
                co_await copy_one_way(sandbox, origin, m_bytes_up, m_deadline, idle);
                if (!down_done) co_await both_done.async_wait(redirect_error(use_awaitable, ec));
            }
            break;
        }
        if (!keep) break;
    }
    clear_deadline();
    finish("terminated connection closed");
}

}  // namespace agentctl::egress_proxy
