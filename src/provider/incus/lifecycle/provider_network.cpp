// The network policy of a sandbox on its bridge: the ACL, the host firewall
// table, the resolver and the egress proxy (wherever it is placed), bringing
// them up at create and start, their status lines, and live policy changes.
#include <chrono>
#include <future>
#include <optional>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/utc_time.hpp"
#include "core/files.hpp"
#include "agentctl/host_network.hpp"
#include "policy/secret_store.hpp"
#include "provider/common/process_identity.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"
#include "provider/common/sandbox_secrets.hpp"
#include "provider/incus/network/proxy_instance.hpp"

namespace agentctl::provider::incus {

AclRules IncusProvider::plan_acl(const std::string& sandbox, const policy::NetworkPolicy& network,
                                 const Ipv4Net& subnet, ProxyPlacement placement, bool report) {
    AclContext context{subnet.host(1).address_text(), k_egress_proxy_port, policy::host_own_addresses(), {}, {}, {}};
    if (placement == ProxyPlacement::Instance) {
        context.proxy_instance = proxy_address(placement, subnet).address_text();
        context.sandbox = subnet.host(2).address_text();
        // Other sandboxes' bridges are carved from this pool.
        if (auto pool = parse_ipv4_net(setting(m_context, config_key::k_subnet_pool))) {
            context.proxy_refused.push_back(Ipv4Net{pool->network(), pool->prefix}.to_string());
        }
    }
    auto rules = build_acl_rules(network, context);
    if (report) {
        for (const auto& note : rules.notes) m_context.reporter.warning(fmt::format("{}: {}", sandbox, note));
    }
    return rules;
}

FirewallSpec IncusProvider::firewall_spec(const std::string& bridge, const Ipv4Net& subnet, ProxyPlacement placement,
                                          const AclRules& rules, const policy::NetworkPolicy& network) {
    FirewallSpec spec{bridge, subnet.host(1).address_text(), k_egress_proxy_port, host_uid_set(), rules.direct, {}, {}};
    spec.dns = !network.dns.disabled;
    if (placement == ProxyPlacement::Instance) {
        spec.proxy_instance = proxy_address(placement, subnet).address_text();
        spec.sandbox = subnet.host(2).address_text();
    }
    return spec;
}

// The image a create starts from: --image, else the incus.image setting; a
// local alias must exist (a fingerprint is left to Incus to judge).
std::vector<std::string> IncusProvider::plan_dns_servers(const policy::NetworkPolicy& network) {
    const auto resolv = core::read_file_if_exists("/etc/resolv.conf").value_or("");
    const auto upstreams = dns_upstreams(network, resolv);
    if (upstreams.empty() && !network.dns.disabled) {
        m_context.reporter.warning(
            "no DNS upstream for the sandbox's resolver (no IP address in network.dns.servers or "
            "/etc/resolv.conf): allowlisted names do not resolve inside it; the egress proxy still reaches them");
    }
    // A grant that has ended resolves no more once the resolver is (re)started.
    const auto now = core::epoch_seconds_now();
    return dns_servers(policy::in_force_at(network, now), upstreams);
}

std::string IncusProvider::plan_dnsmasq(const policy::NetworkPolicy& network) {
    return dnsmasq_config(plan_dns_servers(network));
}

ResolverSpec IncusProvider::plan_resolver(const std::string& bridge, const Ipv4Net& bridge_net,
                                          const policy::NetworkPolicy& network) {
    return ResolverSpec{bridge,
                        bridge_net.address_text(),
                        bridge_net.host(2).address_text(),
                        bridge_net.netmask_text(),
                        plan_dns_servers(network),
                        network.enabled};
}

BridgeResolver IncusProvider::resolver_for(bool confined, ProxyPlacement placement) const {
    // An unconfined sandbox's bridge keeps Incus's resolver (it forwards every name).
    return confined && egress(placement).runs_resolver() ? BridgeResolver::Host : BridgeResolver::Incus;
}

std::future<void> IncusProvider::egress_up(const EgressSite& site, ProxyPlacement placement,
                                           const policy::NetworkPolicy& network, const AclRules& rules,
                                           BridgeResolver resolver, bool background) {
    auto& host = egress(placement);
    if (host.host_firewall()) host.install_firewall(firewall_spec(site.bridge, site.subnet, placement, rules, network));
    host.write_policy(site, network);
    std::optional<ResolverSpec> resolver_spec;
    if (resolver == BridgeResolver::Host) {
        resolver_spec = plan_resolver(site.bridge, site.subnet, network);
        m_context.reporter.step(
            fmt::format("starting the resolver of {} on {}:{}", site.sandbox, site.subnet.address_text(), k_dns_port));
    }
    const auto where = proxy_address(placement, site.subnet).address_text();
    m_context.reporter.step(
        placement == ProxyPlacement::Instance
            ? fmt::format("starting the egress proxy of {} in instance {} on {}:{}", site.sandbox,
                          companion_name(site.sandbox), where, k_egress_proxy_port)
            : fmt::format("starting the egress proxy of {} on {}:{}", site.sandbox, where, k_egress_proxy_port));
    auto services_up = [&host, site, resolver_spec] {
        if (resolver_spec) host.start_resolver(site, *resolver_spec, false);
        host.start_proxy(site);
    };
    if (!background) {
        services_up();
        return {};
    }
    // Until they listen the sandbox simply has no egress (nothing else is admitted).
    return std::async(std::launch::async, services_up);
}

void IncusProvider::stop_egress_services(const EgressSite& site, EgressHost& host) {
    if (host.stop_proxy(site)) m_context.reporter.step(fmt::format("stopped the egress proxy of {}", site.sandbox));
    if (host.stop_resolver(site)) m_context.reporter.step(fmt::format("stopped the resolver of {}", site.sandbox));
}

void IncusProvider::stop_egress_services(const std::string& name, EgressHost& host) {
    stop_egress_services(site_of(name, read_sandbox_record(require_instance(name))), host);
}

void IncusProvider::restore_egress(const std::string& name, const SandboxRecord& record) {
    if (!record.network) return;
    const auto& network = *record.network;
    auto site = site_of(name, record);
    if (site.subnet.prefix == 0) return;
    if (!site.host.recorded() && server_is_this_machine() && !m_api.preview()) site.host = record_host_user(name);
    const auto placement = record.placement;
    const auto resolver = record.resolver;
    if (!network.enabled) {
        // No policy (it was detached), but agentctl's resolver still serves DHCP and DNS.
        if (resolver == BridgeResolver::Host) {
            egress(placement).start_resolver(site, plan_resolver(site.bridge, site.subnet, network), false);
        }
        return;
    }
    const auto bridge = m_api.network(site.bridge);
    if (placement == ProxyPlacement::Instance && !m_api.preview() && bridge) {
        if (auto why = strangers_problem(name, site.bridge, *bridge); !why.empty()) {
            throw Error(fmt::format("{} is not started: {}", name, why),
                        fmt::format("remove them from bridge {} (incus config device remove, incus profile "
                                    "device remove, or delete them), then `agentctl start {}`",
                                    site.bridge, name));
        }
    }
    const auto rules = plan_acl(name, network, site.subnet, placement, false);
    reattach_acl(name, rules, bridge);
    (void)egress_up(site, placement, network, rules, resolver, false);
}

void IncusProvider::add_egress_lines(const SandboxRecord& record, InstanceInfo& info) const {
    if (!info.network || !info.network->enabled) return;
    const auto& gateway = record.subnet;
    if (!gateway) return;
    const auto placement = record.placement;
    auto& host = egress(placement);
    const auto site = site_of(info.name, record);
    const auto status = host.proxy_status(site);
    const auto restart = fmt::format("`agentctl start {}` restarts it", info.name);
    // The host's proxy runs as the sandbox's own uid (as status finds it); the
    // companion's as nobody inside its instance.
    HostProcess proxy{
        status.listen,   status.pid > 0,
        status.pid,      placement == ProxyPlacement::Host && status.pid > 0 ? common::user_text(status.uid) : "nobody",
        "host",          {},
        status.log_path, status.problem};
    if (placement == ProxyPlacement::Instance) {
        proxy.where = "instance " + status.instance;
        info.extra.emplace_back("Egress proxy",
                                proxy.running
                                    ? fmt::format("{} (instance {}, running, pid {} there, as {})", status.listen,
                                                  status.instance, status.pid, proxy.user)
                                    : fmt::format("{} (instance {}, NOT running: {}; nothing of agentctl's serves "
                                                  "the sandbox's egress; {})",
                                                  status.listen, status.instance, status.problem, restart));
        info.extra.emplace_back("Host firewall", host.host_firewall()
                                                     ? "nft table inet " + firewall_table(bridge_name(info.name))
                                                     : "none: the Incus server is not this machine (the bridge ACL "
                                                       "is the only enforcement point)");
    } else {
        info.extra.emplace_back(
            "Egress proxy", proxy.running
                                ? fmt::format("{} (running, pid {}, as {})", status.listen, status.pid, proxy.user)
                            : status.problem.empty()
                                ? fmt::format("{} (NOT running: the sandbox has no egress; {})", status.listen, restart)
                                : fmt::format("{} (NOT running: {}; {})", status.listen, status.problem, restart));
    }
    info.egress_proxy = proxy;
    if (!status.log_path.empty()) info.extra.emplace_back("Egress log", status.log_path);
    // Bindings only: the record holds no value.
    for (const auto& secret : common::read_sandbox_secrets(state_dir_of(m_context, site.host, site.sandbox))) {
        info.extra.emplace_back("Secret " + secret.name,
                                policy::describe_secret_use({secret.name, secret.env, secret.hosts, secret.origin}));
    }
    HostProcess resolver;
    resolver.listen = fmt::format("{}:{}", gateway->address_text(), k_dns_port);
    resolver.scope = !info.network->dns.disabled ? "answers allowlisted names only"
                     : host.host_firewall()      ? "closed to the sandbox: network.dns.disabled; DHCP only"
                                                 : "answers no name: network.dns.disabled";
    if (record.resolver == BridgeResolver::Host) {
        resolver.where = "host";
        resolver.pid = m_egress->resolver_pid(site);
        resolver.running = resolver.pid > 0;
        resolver.user = resolver.running ? common::user_text(common::process_uid(resolver.pid).value_or(0)) : "";
        info.extra.emplace_back(
            "Resolver", resolver.running
                            ? fmt::format("{} ({}; agentctl's dnsmasq, pid {}, as {})", gateway->address_text(),
                                          resolver.scope, resolver.pid, resolver.user)
                            : fmt::format("{} (NOT running: the sandbox has no DNS or DHCP; `agentctl start {}` "
                                          "restarts it)",
                                          gateway->address_text(), info.name));
    } else {
        resolver.where = "bridge";
        resolver.running = true;  // Incus's own dnsmasq serves the bridge while it exists
        info.extra.emplace_back("Resolver",
                                fmt::format("{} ({}; the bridge's dnsmasq)", gateway->address_text(), resolver.scope));
    }
    info.resolver = resolver;
    if (const auto resolve = setting(m_context, config_key::k_proxy_resolve_file); !resolve.empty()) {
        info.extra.emplace_back("Proxy names", "resolved from " + resolve + " before DNS (incus.proxyResolveFile)");
    }
}

void IncusProvider::apply_network_policy(const std::string& given, const policy::NetworkPolicy& network) {
    apply_policy(instance_of(given), network, {});
}

void IncusProvider::apply_policy(const std::string& name, const policy::NetworkPolicy& network,
                                 const std::map<std::string, std::string>& also) {
    const auto instance = require_instance(name);
    const auto record = read_sandbox_record(instance);
    const auto bridge = bridge_name(name);
    const auto acl = acl_name(name);
    auto site = site_of(name, record);
    if (site.subnet.prefix == 0) {
        if (!m_api.preview()) throw Error(fmt::format("{} has no bridge address recorded; recreate it", name));
        site.subnet = *parse_ipv4_net("10.0.0.1/28");
    }
    const auto placement = record.placement;
    auto& host = egress(placement);
    const auto& old = record.network;
    const auto resolver = record.resolver;
    // agentctl's resolver takes the new allowlist by a restart (milliseconds).
    auto restart_resolver = [&] {
        if (resolver != BridgeResolver::Host) return;
        m_context.reporter.step(fmt::format("restarting the resolver of {}", name));
        host.start_resolver(site, plan_resolver(bridge, site.subnet, network), true);
    };
    if (network.enabled) {
        auto rules = plan_acl(name, network, site.subnet, placement);
        auto payload = in_project(acl_payload(name, rules));
        if (m_api.acl(acl)) {
            m_context.reporter.step(fmt::format("updating network ACL {} ({} rules)", acl, payload["egress"].size()));
            m_api.put_acl(acl, payload);
        } else {
            m_context.reporter.step(fmt::format("creating network ACL {}", acl));
            m_api.create_acl(payload);
        }
        Json bridge_patch{{"security.acls", acl},
                          {"security.acls.default.egress.action", "reject"},
                          {"security.acls.default.ingress.action", "reject"}};
        if (resolver == BridgeResolver::Incus) bridge_patch["raw.dnsmasq"] = plan_dnsmasq(network);
        patch_bridge(bridge, bridge_patch);
        restart_resolver();
        m_context.reporter.step(fmt::format("reloading the egress proxy of {}", name));
        if (host.host_firewall()) host.install_firewall(firewall_spec(bridge, site.subnet, placement, rules, network));
        host.write_policy(site, network);
        // The ACL admits established connections first: forget those to the
        // IP destinations it no longer admits, so that they are cut now.
        if (old && old->enabled && !m_api.preview()) {
            const auto before = plan_acl(name, *old, site.subnet, placement, false).direct;
            std::vector<std::string> removed;
            for (const auto& destination : before) {
                bool kept = false;
                for (const auto& now : rules.direct) {
                    kept = kept || (now.address == destination.address && now.ports == destination.ports);
                }
                if (!kept) removed.push_back(destination.address);
            }
            const auto guest = removed.empty() ? std::string() : wait_for_address(name, 0);
            if (!guest.empty()) {
                auto problem = host.forget_connections({guest}, removed);
                if (!problem.empty()) m_context.reporter.warning(fmt::format("{}: {}", name, problem));
            }
        }
    } else {
        m_context.reporter.step(fmt::format("detaching network ACL {}: egress is now unrestricted", acl));
        Json bridge_patch{{"security.acls", ""}};
        if (resolver == BridgeResolver::Incus) bridge_patch["raw.dnsmasq"] = "";
        patch_bridge(bridge, bridge_patch);
        m_api.delete_acl(acl);
        host.write_policy(site, network);
        restart_resolver();
    }
    // The recorded widenings follow the new policy.
    std::map<std::string, std::string> records{
        {std::string(key::k_network), network_record(network)},
        {std::string(key::k_acl), network.enabled ? acl : ""},
        {std::string(key::k_widenings), widenings_record(widening_view(record, network))},
        {std::string(key::k_confinement), ""}};
    records.insert(also.begin(), also.end());
    if (!instance.running() || m_api.preview()) {
        set_records(name, records);
        return;
    }
    // Recorded with the probes' verdict, in one request: until then the
    // recorded digests are the old policy's, and status says "not verified".
    auto changed = instance;
    for (const auto& [key, value] : records) changed.config[key] = value;
    verify_confinement(name, read_sandbox_record(changed), {}, records);
}

}  // namespace agentctl::provider::incus
