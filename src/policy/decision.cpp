// The one decision function: pre_decide() before a lookup, decide() after it.
// The egress proxy, `policy check` and the Incus ACL builder all call these.
#include <algorithm>

#include <fmt/format.h>

#include "agentctl/policy.hpp"
#include "policy/addresses.hpp"

namespace agentctl::policy {
namespace {

Decision refusal(Reason reason, std::string detail) {
    Decision decision;
    decision.allowed = false;
    decision.reason = reason;
    decision.detail = std::move(detail);
    return decision;
}

bool port_in(const AllowRule& rule, std::uint16_t port) {
    return rule.ports.empty() || std::binary_search(rule.ports.begin(), rule.ports.end(), port);
}

bool name_matches(const AllowRule& rule, std::string_view host) {
    if (rule.kind == HostKind::Name) return rule.host == host;
    if (rule.kind == HostKind::Wildcard) {
        return host.size() > rule.host.size() + 1 && host.ends_with(rule.host) &&
               host[host.size() - rule.host.size() - 1] == '.';
    }
    return false;
}

struct Match {
    const AllowRule* rule = nullptr;  // the best rule naming the host
    bool port_ok = false;             // ... and it allows the port
};

// Prefers a rule that allows the port, then an exact name over a wildcard.
template <typename Predicate>
Match find_rule(const NetworkPolicy& policy, std::uint16_t port, Predicate names_host) {
    Match best;
    int best_score = -1;
    for (const auto& rule : policy.allow) {
        if (!names_host(rule)) continue;
        bool ok = port_in(rule, port);
        int score = (ok ? 2 : 0) + (rule.kind != HostKind::Wildcard ? 1 : 0);
        if (score > best_score) {
            best = {&rule, ok};
            best_score = score;
        }
    }
    return best;
}

// The classes no policy can open: the proxy runs on the host, so these would
// reach the host itself or nowhere sensible.
std::optional<Decision> always_refused(const IpAddress& address, std::span<const IpAddress> own) {
    auto address_class = classify(address);
    auto text = address.to_string();
    switch (address_class) {
        case AddressClass::Loopback:
            return refusal(Reason::Loopback,
                           fmt::format("{} is a loopback address; it would reach the host itself", text));
        case AddressClass::Unspecified:
            return refusal(Reason::Unspecified, fmt::format("{} is an unspecified (0.0.0.0/8 or ::) address", text));
        case AddressClass::Multicast: return refusal(Reason::Multicast, fmt::format("{} is a multicast address", text));
        case AddressClass::Broadcast:
            return refusal(Reason::Broadcast, fmt::format("{} is the broadcast address", text));
        case AddressClass::Reserved:
            return refusal(Reason::Reserved, fmt::format("{} is in a reserved, never-routable range", text));
        case AddressClass::Public:
        case AddressClass::Lan: break;
    }
    if (is_own_address(address, own)) {
        return refusal(Reason::HostAddress, fmt::format("{} is one of this machine's own addresses", text));
    }
    return std::nullopt;
}

Decision allowed(Reason reason, std::string detail, const AllowRule* rule, const IpAddress& address) {
    Decision decision;
    decision.allowed = true;
    decision.reason = reason;
    decision.detail = std::move(detail);
    if (rule != nullptr) decision.rule = *rule;
    decision.address = address;
    return decision;
}

std::string rule_text(const AllowRule& rule) {
    return rule.origin.empty() ? rule.entry() : fmt::format("{} (from {})", rule.entry(), rule.origin);
}

Decision port_refusal(const AllowRule& rule, std::string_view what, std::uint16_t port) {
    std::string ports;
    for (auto p : rule.ports) ports.append(ports.empty() ? "" : ",").append(std::to_string(p));
    auto decision = refusal(Reason::PortNotAllowed, fmt::format("{} is allowed only on port {} by {}, not on port {}",
                                                                what, ports, rule_text(rule), port));
    decision.rule = rule;
    return decision;
}

// Vets one address for a destination whose allow-rule match is already known.
// `what` names the destination for the sentences ("example.com" or the IP).
Decision vet(const NetworkPolicy& policy, const IpAddress& address, std::uint16_t port, const Match& match,
             std::string_view what, bool bare_ip, std::span<const IpAddress> own) {
    if (auto refused = always_refused(address, own)) return *refused;
    auto text = address.to_string();
    if (!policy.enabled) {
        return allowed(Reason::PolicyDisabled,
                       "the network policy is disabled (--no-network-policy): egress is unrestricted", nullptr,
                       address);
    }
    if (classify(address) == AddressClass::Lan) {
        if (policy.allow_lan) {
            if (match.port_ok) {
                return allowed(Reason::Allowlisted,
                               fmt::format("{} port {} is allowed by {}", what, port, rule_text(*match.rule)),
                               match.rule, address);
            }
            return allowed(Reason::AllowLan, fmt::format("{} is a LAN address and the LAN is open (--allow-lan)", text),
                           nullptr, address);
        }
        if (policy.deny_lan) {
            return refusal(Reason::Lan, fmt::format("{} is a LAN address and deny-LAN is on", text));
        }
    }
    if (match.port_ok) {
        return allowed(Reason::Allowlisted,
                       fmt::format("{} port {} is allowed by {}", what, port, rule_text(*match.rule)), match.rule,
                       address);
    }
    if (match.rule != nullptr) return port_refusal(*match.rule, what, port);
    if (bare_ip) {
        return refusal(Reason::BareIpNotListed,
                       fmt::format("{} was asked for by address and no allow rule names that address", text));
    }
    return refusal(Reason::NotAllowlisted, fmt::format("no allow rule names {}", what));
}

std::string_view strip_brackets(std::string_view host) {
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
    return host;
}

}  // namespace

std::string_view to_string(Reason reason) {
    switch (reason) {
        case Reason::Allowlisted: return "allowlisted";
        case Reason::AllowLan: return "allow-lan";
        case Reason::PolicyDisabled: return "policy-disabled";
        case Reason::NotAllowlisted: return "not-allowlisted";
        case Reason::PortNotAllowed: return "port-not-allowed";
        case Reason::BareIpNotListed: return "bare-ip-not-listed";
        case Reason::Loopback: return "loopback";
        case Reason::Unspecified: return "unspecified";
        case Reason::Multicast: return "multicast";
        case Reason::Broadcast: return "broadcast";
        case Reason::Reserved: return "reserved";
        case Reason::HostAddress: return "host-address";
        case Reason::SandboxNetwork: return "sandbox-network";
        case Reason::Lan: return "lan";
        case Reason::NoAddress: return "no-address";
        case Reason::InvalidHost: return "invalid-host";
        case Reason::PolicyUnavailable: return "policy-unavailable";
    }
    return "unknown";
}

bool rule_names_host(const AllowRule& rule, std::string_view raw_host) {
    std::string host = normalise_host(strip_brackets(raw_host));
    if (auto ip = parse_ip_literal(host)) {
        if (rule.kind != HostKind::Ip) return false;
        auto rule_ip = parse_ip_literal(rule.host);
        return rule_ip && same_destination(*rule_ip, *ip);
    }
    return name_matches(rule, host);
}

std::optional<Decision> pre_decide(const NetworkPolicy& policy, std::string_view raw_host, std::uint16_t port,
                                   std::span<const IpAddress> host_own_addresses) {
    if (port == 0) return refusal(Reason::PortNotAllowed, "port 0 is not a destination port");
    std::string host = normalise_host(strip_brackets(raw_host));
    if (auto ip = parse_ip_literal(host)) {
        auto match = find_rule(policy, port, [&](const AllowRule& rule) {
            if (rule.kind != HostKind::Ip) return false;
            auto rule_ip = parse_ip_literal(rule.host);
            return rule_ip && same_destination(*rule_ip, *ip);
        });
        auto text = ip->to_string();
        return vet(policy, *ip, port, match, text, true, host_own_addresses);
    }
    if (auto problem = hostname_problem(host); !problem.empty()) {
        return refusal(Reason::InvalidHost, fmt::format("\"{}\" is not a valid host name: {}", raw_host, problem));
    }
    if (!policy.enabled) return std::nullopt;
    auto match = find_rule(policy, port, [&](const AllowRule& rule) { return name_matches(rule, host); });
    if (match.port_ok || policy.allow_lan) return std::nullopt;  // under allow-LAN a name may still reach the LAN
    if (match.rule != nullptr) return port_refusal(*match.rule, host, port);
    return refusal(Reason::NotAllowlisted, fmt::format("no allow rule names {}", host));
}

std::optional<Decision> vet_route(const IpAddress& address, const Route& route) {
    auto text = address.to_string();
    auto via = route.interface.empty() ? std::string() : fmt::format(" (via {})", route.interface);
    switch (route.kind) {
        case RouteKind::Away: return std::nullopt;
        case RouteKind::HostLocal:
            return refusal(Reason::HostAddress, fmt::format("{} is one of this machine's own addresses{}", text, via));
        case RouteKind::SandboxNetwork:
            return refusal(Reason::SandboxNetwork,
                           fmt::format("{} is behind {}, a bridge with only containers and VMs of this machine "
                                       "on it (another sandbox)",
                                       text, route.interface.empty() ? std::string("a bridge") : route.interface));
        case RouteKind::Unknown:
            return refusal(Reason::HostAddress,
                           fmt::format("the kernel could not say where {} is routed, so it is refused as possibly "
                                       "one of this machine's own addresses",
                                       text));
    }
    return std::nullopt;
}

Decision decide(const NetworkPolicy& policy, std::string_view raw_host, std::uint16_t port,
                std::span<const IpAddress> resolved, std::span<const IpAddress> host_own_addresses) {
    if (auto early = pre_decide(policy, raw_host, port, host_own_addresses)) return *early;
    std::string host = normalise_host(strip_brackets(raw_host));
    auto match = find_rule(policy, port, [&](const AllowRule& rule) { return name_matches(rule, host); });
    if (resolved.empty()) return refusal(Reason::NoAddress, fmt::format("{} did not resolve to any address", host));
    std::optional<Decision> first_refusal;
    for (const auto& address : resolved) {
        auto decision = vet(policy, address, port, match, host, false, host_own_addresses);
        if (decision.allowed) return decision;
        if (!first_refusal) first_refusal = std::move(decision);
    }
    auto decision = std::move(*first_refusal);
    if (resolved.size() > 1) {
        decision.detail += fmt::format(" (and none of the other {} addresses passed)", resolved.size() - 1);
    }
    return decision;
}

}  // namespace agentctl::policy
