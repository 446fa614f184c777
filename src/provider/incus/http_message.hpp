// The HTTP messages both transports exchange with the daemon (unix socket and
// TLS): one request built the same way, one response taken apart the same way.
#pragma once

#include <cstdint>
#include <string_view>

#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include "provider/incus/client.hpp"

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
// either transport: 0 / false on any error.
template <typename Stream>
[[nodiscard]] std::size_t read_some_from(Stream& stream, char* out, std::size_t size) {
    boost::beast::error_code ec;
    const auto n = stream.read_some(boost::asio::buffer(out, size), ec);
    return ec ? 0 : n;
}
template <typename Stream>
[[nodiscard]] bool write_all_to(Stream& stream, const char* data, std::size_t size) {
    boost::beast::error_code ec;
    boost::asio::write(stream, boost::asio::buffer(data, size), ec);
    return !ec;
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
