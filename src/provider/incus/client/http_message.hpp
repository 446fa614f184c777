// The HTTP messages both transports exchange with the daemon (unix socket and
// TLS): one request built the same way, one response taken apart the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include <spdlog/spdlog.h>

#include "agentctl/error.hpp"
#include "provider/incus/client/client.hpp"

namespace agentctl::provider::incus {

namespace http = boost::beast::http;

// GET/POST/... of `target` with `body` (a body, and a Content-Type, for every
// POST, PUT and PATCH; application/json unless `content_type` says otherwise).
[[nodiscard]] inline http::request<http::string_body> build_request(std::string_view method, std::string_view target,
                                                                    std::string_view body,
                                                                    std::string_view content_type,
                                                                    std::string_view host) {
    using boost::beast::string_view;
    http::request<http::string_body> request;
    request.method(http::string_to_verb(string_view(method.data(), method.size())));
    request.target(string_view(target.data(), target.size()));
    request.version(11);
    request.set(http::field::host, string_view(host.data(), host.size()));
    request.set(http::field::user_agent, "agentctl");
    if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
        request.set(http::field::content_type, content_type.empty()
                                                   ? string_view("application/json")
                                                   : string_view(content_type.data(), content_type.size()));
        request.body() = std::string(body);
    }
    request.prepare_payload();
    return request;
}

// ByteStream's reads and writes (websockets) over a synchronous Asio stream of
// either transport: 0 / false on any error. A signal that arrives while one
// waits (exec forwards Ctrl-C to the command) interrupts Asio's wait even
// under SA_RESTART, on a socket that an asynchronous connect left in
// non-blocking mode: that is no error, the read or write goes on.
template <typename Stream>
[[nodiscard]] std::size_t read_some_from(Stream& stream, char* out, std::size_t size) {
    for (;;) {
        boost::beast::error_code ec;
        const auto n = stream.read_some(boost::asio::buffer(out, size), ec);
        if (ec == boost::asio::error::interrupted && n == 0) continue;
        return ec ? 0 : n;
    }
}
template <typename Stream>
[[nodiscard]] bool write_all_to(Stream& stream, const char* data, std::size_t size) {
    for (;;) {
        boost::beast::error_code ec;
        const auto n = boost::asio::write(stream, boost::asio::buffer(data, size), ec);
        if (ec != boost::asio::error::interrupted) return !ec;
        data += n;
        size -= n;
    }
}

// Runs `exchange` (one request) and logs it at info level (-v): `who` (the
// remote's name; empty for the local socket), method, path, status and time,
// or the failure and its time.
template <typename Exchange>
[[nodiscard]] HttpResponse logged_exchange(std::string_view who, std::string_view method, std::string_view target,
                                           Exchange&& exchange) {
    const auto start = std::chrono::steady_clock::now();
    auto elapsed_ms = [&] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    };
    const std::string prefix = who.empty() ? std::string("incus") : "incus " + std::string(who) + ":";
    try {
        auto response = exchange();
        spdlog::info("{} {} {} -> {} ({} ms)", prefix, method, target, response.status, elapsed_ms());
        return response;
    } catch (const Error& error) {
        spdlog::info("{} {} {} failed after {} ms: {}", prefix, method, target, elapsed_ms(), error.what());
        throw;
    }
}

// A parser for the daemon's answer: exec logs and files can be large.
inline void allow_large_bodies(http::response_parser<http::string_body>& parser) {
    parser.body_limit(std::uint64_t{1} << 31);
}

[[nodiscard]] inline HttpResponse to_response(http::response<http::string_body>&& response) {
    HttpResponse result;
    result.status = static_cast<int>(response.result_int());
    result.content_type = std::string(response[http::field::content_type]);
    result.body = std::move(response.body());
    return result;
}

}  // namespace agentctl::provider::incus
