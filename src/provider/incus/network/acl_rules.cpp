#include "provider/incus/network/acl_rules.hpp"

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "provider/incus/guest/guest_proxy_scripts.hpp"
#include "provider/incus/lifecycle/naming.hpp"

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
    void add(std::string destination, std::string protocol, std::string ports, std::string description,
             std::string source = {}, std::string action = "allow") {
        auto key = std::make_tuple(action, source, destination, protocol, ports);
        if (!m_seen.insert(key).second) return;
        Json rule{{"action", std::move(action)}, {"state", "enabled"}, {"description", std::move(description)}};
        if (!source.empty()) rule["source"] = std::move(source);
        if (!destination.empty()) rule["destination"] = std::move(destination);
        if (!protocol.empty()) rule["protocol"] = std::move(protocol);
        if (!ports.empty()) rule["destination_port"] = std::move(ports);
        m_rules.push_back(std::move(rule));
    }
    Json take() { return std::move(m_rules); }

private:
    std::set<std::tuple<std::string, std::string, std::string, std::string, std::string>> m_seen;
    Json m_rules = Json::array();
};

}  // namespace

AclRules build_acl_rules(const policy::NetworkPolicy& policy, const AclContext& context) {
    AclRules result;
    RuleSet rules;
    const bool instance = !context.proxy_instance.empty();
    // Instance placement: every rule names its source, so that what the
    // sandbox may do and what its proxy may do stay apart.
    const std::string sandbox = instance ? context.sandbox + "/32" : std::string();
    if (instance) {
        rules.add(context.proxy_instance + "/32", "tcp", std::to_string(context.proxy_port),
                  "the sandbox's egress proxy (its companion instance)", sandbox);
    } else {
        rules.add(context.gateway + "/32", "tcp", std::to_string(context.proxy_port), "the sandbox's egress proxy");
    }
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
                  fmt::format("{} ({})", rule.entry(), rule.origin), sandbox);
        result.direct.push_back({decision->address->to_string(), ports_text(rule.ports)});
    }
    if (instance) {
        // Rejects come before allows in Incus, whatever the order here. DNS
        // to the bridge's own resolver is admitted by Incus before any rule.
        std::string refused = context.gateway + "/32";
        for (const auto& address : context.host_own) {
            if (!address.v6) refused.append(",").append(host_cidr(address));
        }
        for (const auto& range : context.proxy_refused) refused += "," + range;
        rules.add(refused, "", "", "the egress proxy instance never reaches the host or other sandboxes",
                  context.proxy_instance + "/32", "reject");
        rules.add("", "tcp", "", "the egress proxy instance: outside destinations (it vets every address itself)",
                  context.proxy_instance + "/32");
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

std::vector<std::string> dns_servers(const policy::NetworkPolicy& policy, std::span<const std::string> upstreams) {
    std::vector<std::string> servers;
    if (!policy.enabled) return {upstreams.begin(), upstreams.end()};
    if (policy.dns.disabled) return servers;
    // dnsmasq's /DOMAIN/ covers the domain and its subdomains; /*.DOMAIN/ its
    // subdomains only (names ending in .DOMAIN), as a wildcard rule does.
    std::map<std::string, bool> domains;  // domain -> an exact rule names it
    for (const auto& rule : policy.allow) {
        if (rule.kind != policy::HostKind::Ip) domains[rule.host] |= rule.kind == policy::HostKind::Name;
    }
    for (const auto& [domain, exact] : domains) {
        for (const auto& upstream : upstreams)
            servers.push_back(fmt::format("/{}{}/{}", exact ? "" : "*.", domain, upstream));
    }
    return servers;
}

std::string dnsmasq_config(std::span<const std::string> servers) {
    std::string text = "no-resolv\nno-ident\n";
    for (const auto& server : servers) text += "server=" + server + "\n";
    return text + "address=/#/\n";
}

void confine_instance(std::map<std::string, std::string>& config, Json& devices, const Ipv4Net& subnet, bool confined,
                      const std::string& proxy, std::uint16_t proxy_port, Isolation isolation) {
    auto& nic = devices["eth0"];
    nic["ipv4.address"] = subnet.host(2).address_text();
    if (isolation == Isolation::Container) {
        config["raw.lxc"] = fmt::format("lxc.net.0.ipv4.address = {}/{}\nlxc.net.0.ipv4.gateway = {}\n",
                                        subnet.host(2).address_text(), subnet.prefix, subnet.host(1).address_text());
    }
    nic["security.mac_filtering"] = "true";
    nic["security.ipv4_filtering"] = "true";
    if (!confined) return;
    for (const auto& [name, value] : proxy_environment(proxy_url(proxy, proxy_port))) {
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
