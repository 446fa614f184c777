#include "egress_proxy/request_screen.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>

namespace agentctl::egress_proxy {

namespace http = boost::beast::http;

ScreenResult screen_request(std::string_view bytes, const policy::NetworkPolicy& policy,
                            std::span<const policy::IpAddress> host_addresses, std::size_t max_header_bytes) {
    ScreenResult result;
    http::request_parser<http::empty_body> parser;
    configure_request_parser(parser, max_header_bytes);
    parser.eager(false);
    boost::system::error_code ec;
    std::size_t consumed = 0;
    while (!parser.is_header_done() && consumed < bytes.size()) {
        auto n = parser.put(boost::asio::buffer(bytes.data() + consumed, bytes.size() - consumed), ec);
        consumed += n;
        if (ec == http::error::need_more) {
            ec = {};
            if (n == 0) break;
            continue;
        }
        if (ec) break;
    }
    if (ec == http::error::header_limit) {
        result.stage = ScreenResult::Stage::Rejected;
        result.refusal = Refusal{431, ProxyReason::HeaderTooLarge, "the request head is too large"};
        return result;
    }
    if (ec) {
        result.stage = ScreenResult::Stage::Rejected;
        result.refusal =
            Refusal{400, ProxyReason::MalformedRequest, "the request could not be parsed as HTTP/1.1: " + ec.message()};
        return result;
    }
    if (!parser.is_header_done()) {
        if (bytes.size() > max_header_bytes) {
            result.stage = ScreenResult::Stage::Rejected;
            result.refusal = Refusal{431, ProxyReason::HeaderTooLarge, "the request head is too large"};
        }
        return result;
    }
    const auto& head = parser.get();
    result.head_bytes = consumed;
    result.method = std::string(head.method_string());
    auto target_view = head.target();
    auto parsed = parse_request_target(result.method, std::string_view(target_view.data(), target_view.size()));
    if (auto* error = std::get_if<TargetError>(&parsed)) {
        result.stage = ScreenResult::Stage::Rejected;
        result.refusal = Refusal{error->status, error->reason, error->detail};
        return result;
    }
    result.target = std::get<RequestTarget>(std::move(parsed));
    result.decision = policy::pre_decide(policy, result.target->host, result.target->port, host_addresses);
    result.stage = result.decision ? ScreenResult::Stage::Decided : ScreenResult::Stage::NeedsLookup;
    return result;
}

}  // namespace agentctl::egress_proxy
