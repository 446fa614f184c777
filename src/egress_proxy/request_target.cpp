#include "egress_proxy/request_target.hpp"

#include <algorithm>
#include <charconv>

namespace agentctl::egress_proxy {
namespace {

TargetError bad(ProxyReason reason, std::string detail) { return TargetError{400, reason, std::move(detail)}; }

bool host_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

bool v6_char(char c) {
    return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' || c == '.';
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return (x | 0x20) == (y | 0x20); });
}

// Splits `host[:port]` / `[v6][:port]`. `port_required` for CONNECT.
std::variant<RequestTarget, TargetError> parse_authority(std::string_view authority, bool port_required,
                                                         std::uint16_t default_port) {
    RequestTarget out;
    std::string_view host;
    std::string_view port_text;
    bool has_port = false;
    if (authority.empty()) return bad(ProxyReason::InvalidTarget, "the request names no host");
    if (authority.find('@') != std::string_view::npos) {
        return bad(ProxyReason::InvalidTarget, "user information in the request target is not accepted");
    }
    if (authority.front() == '[') {
        auto close = authority.find(']');
        if (close == std::string_view::npos)
            return bad(ProxyReason::InvalidTarget, "an IPv6 address is missing its `]`");
        host = authority.substr(1, close - 1);
        auto rest = authority.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return bad(ProxyReason::InvalidTarget, "unexpected text after the IPv6 address");
            port_text = rest.substr(1);
            has_port = true;
        }
        if (host.empty() || !std::all_of(host.begin(), host.end(), v6_char)) {
            return bad(ProxyReason::InvalidTarget, "the bracketed host is not an IPv6 address");
        }
    } else {
        auto colon = authority.rfind(':');
        if (colon != std::string_view::npos) {
            host = authority.substr(0, colon);
            port_text = authority.substr(colon + 1);
            has_port = true;
        } else {
            host = authority;
        }
        if (host.empty()) return bad(ProxyReason::InvalidTarget, "the request names no host");
        if (!std::all_of(host.begin(), host.end(), host_char)) {
            return bad(ProxyReason::InvalidTarget, "the host contains characters a host name cannot have");
        }
        if (host.size() > 253) return bad(ProxyReason::InvalidTarget, "the host name is longer than 253 characters");
    }
    if (has_port) {
        unsigned value = 0;
        auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
        if (port_text.empty() || port_text.size() > 5 || ec != std::errc() ||
            ptr != port_text.data() + port_text.size() || value == 0 || value > 65535) {
            return bad(ProxyReason::InvalidPort, "the port must be a number from 1 to 65535");
        }
        out.port = static_cast<std::uint16_t>(value);
    } else if (port_required) {
        return bad(ProxyReason::InvalidTarget, "CONNECT needs `host:port`");
    } else {
        out.port = default_port;
    }
    out.host = std::string(host);
    return out;
}

}  // namespace

std::variant<RequestTarget, TargetError> parse_request_target(std::string_view method, std::string_view target) {
    if (method == "CONNECT") {
        auto result = parse_authority(target, true, 0);
        if (auto* t = std::get_if<RequestTarget>(&result)) t->kind = RequestKind::Connect;
        return result;
    }
    if (!target.empty() && target.front() == '/') {
        return bad(ProxyReason::NotAProxyRequest,
                   "this is a proxy: send an absolute URI (`GET http://host/path`) or use CONNECT host:port");
    }
    auto scheme_end = target.find("://");
    if (scheme_end == std::string_view::npos) {
        return bad(ProxyReason::InvalidTarget, "the request target is neither `host:port` nor an absolute http:// URI");
    }
    auto scheme = target.substr(0, scheme_end);
    if (!iequals(scheme, "http")) {
        return bad(ProxyReason::UnsupportedScheme, "only http:// is forwarded; use CONNECT host:443 for https://");
    }
    auto rest = target.substr(scheme_end + 3);
    auto path_start = rest.find_first_of("/?#");
    auto authority = rest.substr(0, path_start);
    auto result = parse_authority(authority, false, 80);
    if (auto* t = std::get_if<RequestTarget>(&result)) {
        t->kind = RequestKind::Forward;
        std::string_view path = path_start == std::string_view::npos ? std::string_view{} : rest.substr(path_start);
        if (auto hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
        // "http://h?q" asks for "/?q".
        t->origin_form.reserve(path.size() + 1);
        if (path.empty() || path.front() != '/') t->origin_form.push_back('/');
        t->origin_form.append(path);
    }
    return result;
}

}  // namespace agentctl::egress_proxy
