#include "provider/incus/acl_rules.hpp"

#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "provider/incus/guest_proxy_scripts.hpp"
#include "provider/incus/naming.hpp"

namespace agentctl::provider::incus {
namespace {

std::string ports_text(const std::vector<std::uint16_t>& ports) {
    std::string text;
    for (auto port : ports) {
        if (!text.empty()) text += ',';
        text += std::to_string(port);
    }
    return text;
}

std::string host_cidr(const policy::IpAddress& address) { return address.to_string() + (address.v6 ? "/128" : "/32"); }

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

}  // namespace

AclRules build_acl_rules(const policy::NetworkPolicy& policy, const AclContext& context) {
    AclRules result;
    RuleSet rules;
    rules.add(context.gateway + "/32", "tcp", std::to_string(context.proxy_port), "the sandbox's egress proxy");
    for (const auto& rule : policy.allow) {
        if (rule.kind != policy::HostKind::Ip) continue;  // names and wildcards: through the proxy
        // The same decision the proxy and `policy check` make, on the rule's
        // own first port (for an IP literal the port only selects the rule).
        const std::uint16_t port = rule.ports.empty() ? std::uint16_t{443} : rule.ports.front();
        const auto decision = policy::pre_decide(policy, rule.host, port, context.host_own);
        if (!decision || !decision->allowed || !decision->address) {
            result.notes.push_back(fmt::format("allow rule {} ({}) is not added: {}", rule.entry(), rule.origin,
                                               decision ? decision->detail : "it is not an address"));
            continue;
        }
        rules.add(host_cidr(*decision->address), "tcp", ports_text(rule.ports),
                  fmt::format("{} ({})", rule.entry(), rule.origin));
        result.direct.push_back({decision->address->to_string(), ports_text(rule.ports)});
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

std::string dns_server_lines(const policy::NetworkPolicy& policy, std::span<const std::string> upstreams) {
    std::string text;
    if (!policy.enabled) {
        for (const auto& upstream : upstreams) text += fmt::format("server={}\n", upstream);
        return text;
    }
    if (policy.dns.disabled) return text;
    std::set<std::string> domains;
    for (const auto& rule : policy.allow) {
        if (rule.kind != policy::HostKind::Ip) domains.insert(rule.host);
    }
    for (const auto& domain : domains) {
        for (const auto& upstream : upstreams) text += fmt::format("server=/{}/{}\n", domain, upstream);
    }
    return text;
}

std::string dnsmasq_config(const policy::NetworkPolicy& policy, std::span<const std::string> upstreams) {
    return "no-resolv\n" + dns_server_lines(policy, upstreams) + "address=/#/\n";
}

void confine_instance(std::map<std::string, std::string>& config, Json& devices, const Ipv4Net& subnet, bool confined,
                      std::uint16_t proxy_port, Isolation isolation) {
    auto& nic = devices["eth0"];
    nic["ipv4.address"] = subnet.host(2).address_text();
    if (isolation == Isolation::Container) {
        config["raw.lxc"] = fmt::format("lxc.net.0.ipv4.address = {}/{}\nlxc.net.0.ipv4.gateway = {}\n",
                                        subnet.host(2).address_text(), subnet.prefix, subnet.host(1).address_text());
    }
    nic["security.mac_filtering"] = "true";
    nic["security.ipv4_filtering"] = "true";
    if (!confined) return;
    for (const auto& [name, value] : proxy_environment(proxy_url(subnet.host(1).address_text(), proxy_port))) {
        config["environment." + name] = value;
    }
}

std::vector<std::string> dns_upstreams(const policy::NetworkPolicy& policy, const std::string& resolv_conf) {
    std::vector<std::string> out;
    auto add = [&out](const std::string& text) {
        if (text.find('%') != std::string::npos) return;  // a scoped link-local address: not for dnsmasq
        auto address = policy::parse_ip_literal(text);
        if (!address) return;
        auto canonical = address->to_string();
        for (const auto& known : out) {
            if (known == canonical) return;
        }
        out.push_back(canonical);
    };
    if (!policy.dns.servers.empty()) {
        for (const auto& server : policy.dns.servers) add(server);
        return out;
    }
    std::istringstream lines(resolv_conf);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        std::string word, value;
        if (fields >> word >> value && word == "nameserver") add(value);
    }
    return out;
}

}  // namespace agentctl::provider::incus
