// The request path without sockets: bytes -> request head -> target -> the
// policy's first decision step. The proxy's sessions configure their parser
// with configure_request_parser, and the fuzz target drives screen_request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <boost/beast/http/parser.hpp>

#include "agentctl/policy.hpp"
#include "egress_proxy/request_target.hpp"
#include "egress_proxy/responses.hpp"

namespace agentctl::egress_proxy {

// The proxy's parser settings: a bounded head, bodies of any length (streamed).
template <class Body>
void configure_request_parser(boost::beast::http::request_parser<Body>& parser, std::size_t max_header_bytes) {
    parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(max_header_bytes, 0xffffffffu)));
    // Not boost::none: Beast 1.74 compares none as less than any length.
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
}

struct ScreenResult {
    enum class Stage {
        NeedMore,     // the head is not complete yet
        Rejected,     // answered before any decision (`refusal`: 400/431)
        Decided,      // pre_decide gave the final word (`decision`)
        NeedsLookup,  // a name: resolve it, then policy::decide
    };
    Stage stage = Stage::NeedMore;
    std::string method;
    std::size_t head_bytes = 0;  // once the head is complete: its length in `bytes`, up to its blank line
    std::optional<RequestTarget> target;
    std::optional<Refusal> refusal;
    std::optional<policy::Decision> decision;
};

// Parses the request head at the start of `bytes` as the proxy does and runs
// the pre-lookup decision. Pure: no sockets, no resolver, no clock.
[[nodiscard]] ScreenResult screen_request(std::string_view bytes, const policy::NetworkPolicy& policy,
                                          std::span<const policy::IpAddress> host_addresses,
                                          std::size_t max_header_bytes);

}  // namespace agentctl::egress_proxy
