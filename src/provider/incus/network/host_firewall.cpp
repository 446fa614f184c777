#include "provider/incus/network/host_firewall.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"

namespace agentctl::provider::incus {

std::string firewall_table(const std::string& bridge) { return "agentctl-" + bridge; }

std::string incus_acl_chain(const std::string& bridge) { return "acl." + bridge; }

std::string firewall_script(const FirewallSpec& spec) {
    const auto table = firewall_table(spec.bridge);
    std::string direct;
    for (const auto& d : spec.direct) {
        if (d.address.find(':') != std::string::npos) continue;  // IPv6 is rejected on the bridge
        direct += fmt::format("    iifname \"{}\" ip daddr {} tcp dport {} return\n", spec.bridge, d.address,
                              d.ports.empty() ? std::string("1-65535") : "{ " + d.ports + " }");
    }
    std::string host_ports;  // TCP on the gateway: the resolver and the host-placed proxy
    if (spec.dns) host_ports = "53";
    if (spec.proxy_instance.empty()) host_ports += fmt::format("{}{}", host_ports.empty() ? "" : ", ", spec.proxy_port);
    const auto host_tcp =
        host_ports.empty()
            ? std::string()
            : fmt::format("    ip daddr {} tcp dport {} accept\n", spec.gateway,
                          host_ports.find(',') == std::string::npos ? host_ports : "{ " + host_ports + " }");
    const auto host_dns = spec.dns ? fmt::format("    ip daddr {} udp dport 53 accept\n", spec.gateway) : std::string();
    std::string companion;  // after the direct rules
    std::string bridged;    // before anything refuses traffic into agc-* bridges
    if (!spec.proxy_instance.empty()) {
        companion =
            fmt::format("    iifname \"{}\" ip saddr {} meta l4proto tcp return\n", spec.bridge, spec.proxy_instance);
        bridged = fmt::format(
            "    iifname \"{0}\" oifname \"{0}\" ip saddr {1} ip daddr {2} tcp dport {3} return\n"
            "    iifname \"{0}\" oifname \"{0}\" ip saddr {2} ip daddr {1} tcp sport {3} return\n",
            spec.bridge, spec.sandbox, spec.proxy_instance, spec.proxy_port);
    }
    return fmt::format(R"NFT(table inet {table} {{}}
delete table inet {table}
table inet {table} {{
  chain input {{
    type filter hook input priority filter - 5; policy accept;
    iifname "{bridge}" jump from_sandbox
  }}
  chain from_sandbox {{
    meta nfproto ipv6 reject
    ip daddr {{ {gw}, 255.255.255.255 }} udp dport 67 accept
{host_dns}{host_tcp}    meta l4proto tcp reject with tcp reset
    reject
  }}
  chain forward {{
    type filter hook forward priority filter - 5; policy accept;
    iifname "{bridge}" meta nfproto ipv6 reject
{bridged}    iifname "{bridge}" oifname "agc-*" reject
{direct}{companion}    iifname "{bridge}" meta l4proto tcp ct state new reject with tcp reset
  }}
  chain output {{
    type filter hook output priority filter - 5; policy accept;
    oifname "{bridge}" meta skuid {uid} udp sport 67 accept
    oifname "{bridge}" meta skuid {uid} ct state new reject
  }}
}}
)NFT",
                       fmt::arg("table", table), fmt::arg("bridge", spec.bridge), fmt::arg("gw", spec.gateway),
                       fmt::arg("host_dns", host_dns), fmt::arg("host_tcp", host_tcp), fmt::arg("uid", spec.proxy_uids),
                       fmt::arg("direct", direct), fmt::arg("companion", companion), fmt::arg("bridged", bridged));
}

std::vector<std::string> firewall_bridges(const std::string& nft_json) {
    const auto document = nlohmann::json::parse(nft_json, nullptr, false);
    if (!document.is_object() || !document.contains("nftables") || !document["nftables"].is_array()) {
        throw Error("nft -j list tables did not print nft's JSON", "check that nft runs: nft -j list tables");
    }
    const auto prefix = firewall_table("");
    std::vector<std::string> bridges;
    for (const auto& entry : document["nftables"]) {
        if (!entry.is_object() || !entry.contains("table")) continue;
        const auto& table = entry["table"];
        const auto name = table.value("name", std::string());
        if (table.value("family", std::string()) != "inet" || !name.starts_with(prefix)) continue;
        bridges.push_back(name.substr(prefix.size()));
    }
    return bridges;
}

std::string firewall_delete_script(const std::string& bridge) {
    const auto table = firewall_table(bridge);
    return fmt::format("table inet {0} {{}}\ndelete table inet {0}\n", table);
}

}  // namespace agentctl::provider::incus
