#include "provider/incus/acl_rules.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "provider/incus/naming.hpp"

namespace agentctl::provider::incus {
namespace {

class SystemResolver final : public Resolver {
public:
    std::vector<policy::IpAddress> resolve(const std::string& host) override {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* result = nullptr;
        std::vector<policy::IpAddress> addresses;
        if (::getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return addresses;
        for (auto* it = result; it != nullptr; it = it->ai_next) {
            policy::IpAddress address;
            if (it->ai_family == AF_INET) {
                const auto* in = reinterpret_cast<const sockaddr_in*>(it->ai_addr);
                std::memcpy(address.bytes.data(), &in->sin_addr, 4);
            } else if (it->ai_family == AF_INET6) {
                const auto* in6 = reinterpret_cast<const sockaddr_in6*>(it->ai_addr);
                address.v6 = true;
                std::memcpy(address.bytes.data(), &in6->sin6_addr, 16);
            } else {
                continue;
            }
            if (std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
                addresses.push_back(address);
            }
        }
        ::freeaddrinfo(result);
        return addresses;
    }
};

std::string ports_text(const std::vector<std::uint16_t>& ports) {
    std::string text;
    for (auto port : ports) {
        if (!text.empty()) text += ',';
        text += std::to_string(port);
    }
    return text;
}

std::string host_cidr(const policy::IpAddress& address) {
    return address.to_string() + (address.v6 ? "/128" : "/32");
}

class RuleSet {
public:
    void add(std::string destination, std::string protocol, std::string ports, std::string description) {
        auto key = std::make_tuple(destination, protocol, ports);
        if (!m_seen.insert(key).second) return;
        Json rule{{"action", "allow"}, {"state", "enabled"}, {"description", std::move(description)}};
        if (!destination.empty()) rule["destination"] = std::move(destination);
        if (!protocol.empty()) rule["protocol"] = std::move(protocol);
        if (!ports.empty()) rule["destination_port"] = std::move(ports);
        m_rules.push_back(std::move(rule));
    }
    Json take() { return std::move(m_rules); }

private:
    std::set<std::tuple<std::string, std::string, std::string>> m_seen;
    Json m_rules = Json::array();
};

std::string_view class_name(policy::AddressClass c) {
    switch (c) {
        case policy::AddressClass::Public: return "public";
        case policy::AddressClass::Loopback: return "loopback";
        case policy::AddressClass::Unspecified: return "unspecified";
        case policy::AddressClass::Multicast: return "multicast";
        case policy::AddressClass::Broadcast: return "broadcast";
        case policy::AddressClass::Reserved: return "reserved";
        case policy::AddressClass::Lan: return "LAN";
    }
    return "unknown";
}

}  // namespace

std::unique_ptr<Resolver> make_system_resolver() { return std::make_unique<SystemResolver>(); }

const std::vector<std::string>& lan_ranges() {
    static const std::vector<std::string> ranges{"10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16",
                                                 "169.254.0.0/16", "100.64.0.0/10", "fc00::/7",
                                                 "fe80::/10",      "fec0::/10"};
    return ranges;
}

ResolvedNames resolve_allow_names(const policy::NetworkPolicy& policy, Resolver& resolver) {
    ResolvedNames resolved;
    for (const auto& rule : policy.allow) {
        if (rule.kind != policy::HostKind::Name || resolved.contains(rule.host)) continue;
        resolved.emplace(rule.host, resolver.resolve(rule.host));
    }
    return resolved;
}

AclRules build_acl_rules(const policy::NetworkPolicy& policy, const ResolvedNames& resolved) {
    AclRules result;
    RuleSet rules;

    if (!policy.dns.disabled) {
        if (policy.dns.servers.empty()) {
            rules.add({}, "udp", "53", "DNS to any server");
            rules.add({}, "tcp", "53", "DNS to any server");
        }
        for (const auto& server : policy.dns.servers) {
            auto address = policy::parse_ip_literal(server);
            if (!address) {
                result.notes.push_back(fmt::format("DNS server \"{}\" is not an IP address; no rule added", server));
                continue;
            }
            rules.add(host_cidr(*address), "udp", "53", fmt::format("DNS to {}", server));
            rules.add(host_cidr(*address), "tcp", "53", fmt::format("DNS to {}", server));
        }
    }

    if (policy.allow_lan) {
        for (const auto& range : lan_ranges()) rules.add(range, {}, {}, "allow-LAN");
    }

    for (const auto& rule : policy.allow) {
        std::vector<policy::IpAddress> addresses;
        if (rule.kind == policy::HostKind::Wildcard) {
            result.notes.push_back(fmt::format(
                "allow rule {} ({}) is a wildcard; Incus ACLs match addresses, so it cannot be enforced and was "
                "not added (list the subdomains you need)",
                rule.entry(), rule.origin));
            continue;
        }
        if (rule.kind == policy::HostKind::Ip) {
            if (auto address = policy::parse_ip_literal(rule.host)) addresses.push_back(*address);
        } else if (auto it = resolved.find(rule.host); it != resolved.end()) {
            addresses = it->second;
        }
        if (addresses.empty()) {
            result.notes.push_back(
                fmt::format("allow rule {} ({}): {} did not resolve; no rule added", rule.entry(), rule.origin, rule.host));
            continue;
        }
        for (const auto& address : addresses) {
            const auto kind = policy::classify(address);
            if (kind != policy::AddressClass::Public) {
                const bool lan_allowed = kind == policy::AddressClass::Lan && policy.allow_lan;
                if (!lan_allowed) {
                    result.notes.push_back(fmt::format("allow rule {} ({}): {} is a {} address; not added{}",
                                                       rule.entry(), rule.origin, address.to_string(),
                                                       class_name(kind),
                                                       kind == policy::AddressClass::Lan ? " (deny-LAN)" : ""));
                }
                continue;  // under allow-LAN the LAN ranges above already cover it
            }
            rules.add(host_cidr(address), "tcp", ports_text(rule.ports),
                      fmt::format("{} ({})", rule.entry(), rule.origin));
        }
    }
    result.egress = rules.take();
    return result;
}

Json acl_payload(const std::string& sandbox, const AclRules& rules) {
    return Json{{"name", acl_name(sandbox)},
                {"description", fmt::format("agentctl egress policy of sandbox {}", sandbox)},
                {"egress", rules.egress},
                {"ingress", Json::array()},
                {"config", {{std::string(key::k_sandbox), sandbox}}}};
}

}  // namespace agentctl::provider::incus
