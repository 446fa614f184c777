// The network policy as Hyper-V extended port ACLs on the sandbox's adapter.
//
// Add-VMNetworkAdapterExtendedAcl (larger -Weight matched first, first match
// decides, -Stateful lets the replies of an allowed flow back in):
// https://learn.microsoft.com/powershell/module/hyper-v/add-vmnetworkadapterextendedacl
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/hyperv/plan.hpp"
#include "provider/hyperv/powershell.hpp"

namespace agentctl::provider::hyperv {
namespace {

// While a policy is swapped in place, a deny-everything entry above every
// policy band keeps the sandbox closed.
constexpr int k_weight_policy_swap = 65000;

struct AclEntry {
    std::string_view action;     // Allow | Deny
    std::string_view direction;  // Inbound | Outbound
    std::string match;           // -RemoteIPAddress ... -RemotePort ... -Protocol ...
    std::string weight;          // a number or a script variable
    bool stateful = false;
};

std::string acl(const Layout& layout, const AclEntry& entry) {
    return fmt::format("Add-VMNetworkAdapterExtendedAcl -VMName {} -Action {} -Direction {} {} -Weight {}{}",
                       ps_quote(layout.vm_name), entry.action, entry.direction, entry.match, entry.weight,
                       entry.stateful ? " -Stateful $true" : "");
}

std::string weight(int value) { return std::to_string(value); }

// The NAT range (the host on every sandbox's switch, and the other sandboxes)
// and every address the host has when the policy is applied.
// Get-NetIPAddress: https://learn.microsoft.com/powershell/module/nettcpip/get-netipaddress
void host_denies(const Layout& layout, Plan& plan) {
    plan.scripts.push_back(acl(
        layout, {"Deny", "Outbound", fmt::format("-RemoteIPAddress {}", k_nat_prefix), weight(k_weight_host_deny)}));
    plan.scripts.push_back(
        fmt::format("$w = {}; foreach ($a in (Get-NetIPAddress).IPAddress) {{ {}; $w++ }}", k_weight_host_deny + 1,
                    acl(layout, {"Deny", "Outbound", "-RemoteIPAddress ($a -replace '%.*$', '')", "$w"})));
    plan.notes.push_back(
        "the host's own addresses are read when the policy is applied; one it gets later is "
        "refused only by the host firewall rules, not by the port ACL");
}

void dns_allows(const Layout& layout, const policy::DnsPolicy& dns, Plan& plan) {
    if (dns.disabled) return;
    std::vector<std::string> servers;
    for (const auto& server : dns.servers) servers.push_back(ps_quote(server));
    if (servers.empty()) servers.emplace_back("ANY");  // any resolver, as on Incus
    int w = k_weight_dns;
    for (const auto& server : servers) {
        for (std::string_view protocol : {"UDP", "TCP"}) {
            plan.scripts.push_back(acl(
                layout,
                {"Allow", "Outbound", fmt::format("-RemoteIPAddress {} -RemotePort 53 -Protocol {}", server, protocol),
                 weight(w++), true}));
        }
    }
}

void lan_rules(const Layout& layout, const policy::NetworkPolicy& network, Plan& plan) {
    if (network.allow_lan) {
        int w = k_weight_lan_allow;
        for (auto range : policy::k_lan_ranges) {
            plan.scripts.push_back(
                acl(layout, {"Allow", "Outbound", fmt::format("-RemoteIPAddress {}", range), weight(w++), true}));
        }
    } else if (network.deny_lan) {
        int w = k_weight_lan_deny;
        for (auto range : policy::k_lan_ranges) {
            plan.scripts.push_back(
                acl(layout, {"Deny", "Outbound", fmt::format("-RemoteIPAddress {}", range), weight(w++)}));
        }
    }
}

// The rule in `--allow` form, for messages.
std::string rule_text(const policy::AllowRule& rule) {
    std::string text = rule.kind == policy::HostKind::Wildcard ? "*." + rule.host : rule.host;
    if (rule.kind == policy::HostKind::Ip && text.find(':') != std::string::npos) text = "[" + text + "]";
    for (std::size_t i = 0; i < rule.ports.size(); ++i) text += fmt::format("{}{}", i == 0 ? ":" : ",", rule.ports[i]);
    return text;
}

// Resolve-DnsName (A and AAAA, DNS only): https://learn.microsoft.com/powershell/module/dnsclient/resolve-dnsname
void allow_rule(const Layout& layout, const policy::AllowRule& rule, int base, Plan& plan) {
    const auto port_count = static_cast<int>(rule.ports.size());
    if (port_count > k_weights_per_allow_rule) {
        throw Error(fmt::format("hyperv: allow rule '{}' ({}) lists {} ports; at most {} fit one rule's ACL entries",
                                rule_text(rule), rule.origin, port_count, k_weights_per_allow_rule),
                    "split the ports over several rules");
    }
    if (rule.kind == policy::HostKind::Wildcard) {
        plan.notes.push_back(fmt::format(
            "allow rule '{}' ({}) is left out: port ACLs match addresses, and a wildcard names no address to "
            "resolve; list the subdomains you need",
            rule_text(rule), rule.origin));
        return;
    }
    if (rule.kind == policy::HostKind::Ip) {
        const auto address = ps_quote(rule.host);
        if (rule.ports.empty()) {
            plan.scripts.push_back(acl(
                layout,
                {"Allow", "Outbound", fmt::format("-RemoteIPAddress {} -Protocol TCP", address), weight(base), true}));
            return;
        }
        std::string script;
        int w = base;
        for (auto port : rule.ports) {
            if (!script.empty()) script += "; ";
            script += acl(layout, {"Allow", "Outbound",
                                   fmt::format("-RemoteIPAddress {} -RemotePort {} -Protocol TCP", address, port),
                                   weight(w++), true});
        }
        plan.scripts.push_back(std::move(script));
        return;
    }
    const int max_addresses = k_weights_per_allow_rule / std::max(1, port_count);
    const auto resolve = fmt::format(
        "(Resolve-DnsName -Name {} -Type A_AAAA -DnsOnly -ErrorAction Stop | Where-Object {{ $_.IPAddress }} | "
        "Select-Object -ExpandProperty IPAddress -First {})",
        ps_quote(rule.host), max_addresses);
    std::string body;
    if (rule.ports.empty()) {
        body = fmt::format("{}; $w++",
                           acl(layout, {"Allow", "Outbound", "-RemoteIPAddress $a -Protocol TCP", "$w", true}));
    } else {
        std::string ports;
        for (auto port : rule.ports) ports.append(ports.empty() ? "" : ",").append(fmt::format("'{}'", port));
        body = fmt::format(
            "foreach ($p in {}) {{ {}; $w++ }}", ports,
            acl(layout, {"Allow", "Outbound", "-RemoteIPAddress $a -RemotePort $p -Protocol TCP", "$w", true}));
    }
    plan.scripts.push_back(fmt::format("$w = {}; foreach ($a in {}) {{ {} }}", base, resolve, body));
}

}  // namespace

Plan network_policy_plan(const Layout& layout, const policy::NetworkPolicy& network) {
    Plan plan;
    if (!network.enabled) {
        plan.notes.push_back("no network policy: no port ACL entries, so the sandbox's egress is unrestricted");
        return plan;
    }
    if (static_cast<int>(network.allow.size()) > k_max_allow_rules) {
        throw Error(fmt::format("hyperv: the policy has {} allow rules; the port ACL plan fits at most {}",
                                network.allow.size(), k_max_allow_rules),
                    "merge rules for the same host");
    }
    host_denies(layout, plan);
    dns_allows(layout, network.dns, plan);
    lan_rules(layout, network, plan);
    for (std::size_t i = 0; i < network.allow.size(); ++i) {
        allow_rule(layout, network.allow[i], k_weight_allowlist + static_cast<int>(i) * k_weights_per_allow_rule, plan);
    }
    if (!network.allow.empty()) {
        plan.notes.push_back(
            "allowlisted names are resolved to addresses when the policy is applied; if a name "
            "moves to new addresses the entry goes stale until the policy is applied again");
    }
    plan.scripts.push_back(acl(layout, {"Deny", "Outbound", "-RemoteIPAddress ANY", weight(k_weight_default_deny)}));
    plan.scripts.push_back(acl(layout, {"Deny", "Inbound", "-RemoteIPAddress ANY", weight(k_weight_default_deny)}));
    return plan;
}

// Get-VMNetworkAdapterExtendedAcl:
// https://learn.microsoft.com/powershell/module/hyper-v/get-vmnetworkadapterextendedacl
// Remove-VMNetworkAdapterExtendedAcl:
// https://learn.microsoft.com/powershell/module/hyper-v/remove-vmnetworkadapterextendedacl
Plan replace_network_policy_plan(const Layout& layout, const policy::NetworkPolicy& network) {
    const auto vm = ps_quote(layout.vm_name);
    Plan plan;
    plan.scripts.push_back(acl(layout, {"Deny", "Outbound", "-RemoteIPAddress ANY", weight(k_weight_policy_swap)}));
    plan.scripts.push_back(
        fmt::format("Get-VMNetworkAdapterExtendedAcl -VMName {} | Where-Object {{ $_.Weight -lt {} }} | "
                    "Remove-VMNetworkAdapterExtendedAcl",
                    vm, k_weight_smb));
    plan.append(network_policy_plan(layout, network));
    plan.scripts.push_back(fmt::format("Remove-VMNetworkAdapterExtendedAcl -VMName {} -Weight {} -Direction Outbound",
                                       vm, k_weight_policy_swap));
    return plan;
}

}  // namespace agentctl::provider::hyperv
