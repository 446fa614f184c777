#include "egress_proxy/responses.hpp"

#include <fmt/format.h>

namespace agentctl::egress_proxy {
namespace {

std::string_view status_text(unsigned status) {
    switch (status) {
        case 400: return "Bad Request";
        case 403: return "Forbidden";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 502: return "Bad Gateway";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        default: return "Error";
    }
}

// What a person can do about a refusal the policy made.
std::string advice(policy::Reason reason, std::string_view destination, std::string_view sandbox) {
    using policy::Reason;
    switch (reason) {
        case Reason::NotAllowlisted:
        case Reason::PortNotAllowed:
        case Reason::BareIpNotListed:
            return fmt::format(
                "This sandbox may only reach destinations on its allowlist. If it should reach this one,\n"
                "a person on the host can allow it with:\n\n    agentctl policy add {} {}\n",
                sandbox, destination);
        case Reason::Lan:
            return fmt::format(
                "Addresses on the local network are refused unless the sandbox was created with --allow-lan.\n"
                "Allowing a name does not open a LAN address it resolves to.\n");
        case Reason::Loopback:
        case Reason::HostAddress:
        case Reason::SandboxNetwork:
        case Reason::Unspecified:
        case Reason::Multicast:
        case Reason::Broadcast:
        case Reason::Reserved: return "This kind of destination is always refused, whatever the allowlist says.\n";
        case Reason::PolicyUnavailable:
            return "The proxy could not read a valid network policy, so it refuses everything until the\n"
                   "policy file is fixed (see the proxy's log).\n";
        case Reason::Allowlisted:
        case Reason::AllowLan:
        case Reason::PolicyDisabled:
        case Reason::NoAddress:
        case Reason::InvalidHost: break;
    }
    return {};
}

// ... and one the proxy made itself.
std::string advice(ProxyReason reason, std::string_view destination, std::string_view sandbox) {
    switch (reason) {
        case ProxyReason::NameNotResolved: return "The host name does not resolve; check its spelling.\n";
        case ProxyReason::ConnectionRefused: return "The destination refused the connection.\n";
        case ProxyReason::ConnectTimeout: return "The destination did not answer in time.\n";
        case ProxyReason::TunnelLimit:
            return "Close some of the sandbox's open connections, or raise its limit (--max-tunnels).\n";
        case ProxyReason::SecretMisplaced:
            return "A sandbox's secrets are put into requests only to the hosts they belong to\n"
                   "(agentctl secret list shows where each goes).\n";
        case ProxyReason::UpstreamUntrusted:
            return "The host's certificate is not trusted by this machine, so no secret is sent to it.\n";
        case ProxyReason::BudgetSpent:
            return fmt::format(
                "The sandbox may send only so much to this destination. If it should send more,\n"
                "a person on the host can raise its budget with:\n\n    agentctl policy budget {} {}=SIZE\n",
                sandbox, destination);
        default: return {};
    }
}

}  // namespace

std::string refusal_response(const Refusal& refusal, std::string_view host, std::uint16_t port,
                             std::string_view sandbox) {
    std::string destination = host.empty() ? std::string() : destination_text(host, port);
    std::string body;
    if (refusal.status == 403) {
        body = fmt::format("agentctl egress proxy: connection to {} refused ({}).\n", destination,
                           to_string(refusal.reason));
    } else if (destination.empty()) {
        body = fmt::format("agentctl egress proxy: request rejected ({}).\n", to_string(refusal.reason));
    } else {
        body = fmt::format("agentctl egress proxy: could not reach {} ({}).\n", destination, to_string(refusal.reason));
    }
    if (!refusal.detail.empty()) body += refusal.detail + "\n";
    const auto* decided = refusal.reason.policy_reason();
    const std::string_view name = sandbox.empty() ? "<sandbox>" : sandbox;
    std::string more = decided != nullptr ? advice(*decided, destination, name)
                                          : advice(*refusal.reason.proxy_reason(), destination, name);
    if (!more.empty()) body += "\n" + more;
    return fmt::format(
        "HTTP/1.1 {} {}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "Content-Length: {}\r\n"
        "X-Agentctl-Reason: {}\r\n"
        "Connection: close\r\n"
        "Proxy-Connection: close\r\n"
        "\r\n{}",
        refusal.status, status_text(refusal.status), body.size(), to_string(refusal.reason), body);
}

}  // namespace agentctl::egress_proxy
