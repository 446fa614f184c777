// create, delete and the network policy: the bridge, its subnet and the ACL.
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <tuple>
#include <filesystem>
#include <future>
#include <thread>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "policy/check.hpp"
#include "core/files.hpp"
#include "provider/incus/cluster.hpp"
#include "provider/incus/guest_proxy_scripts.hpp"
#include "provider/incus/guest_scripts.hpp"
#include "provider/incus/host_ports.hpp"
#include "provider/incus/naming.hpp"
#include "provider/incus/provider_impl.hpp"

namespace agentctl::provider::incus {
namespace {

std::string setting(const ProviderContext& context, const std::string& key, std::string fallback) {
    auto it = context.settings.find(key);
    return it == context.settings.end() || it->second.empty() ? std::move(fallback) : it->second;
}

std::filesystem::path lock_path(const ProviderContext& context) {
    std::filesystem::path dir = context.runtime_dir.empty() ? std::filesystem::temp_directory_path() / "agentctl"
                                                            : std::filesystem::path(context.runtime_dir);
    return dir / "incus" / "network.lock";
}

}  // namespace

std::vector<MountOwner> writable_mount_owners(const std::vector<Mount>& mounts) {
    std::vector<MountOwner> owners;
    for (const auto& mount : mounts) {
        if (!mount.writable) continue;
        struct stat st {};
        if (::stat(mount.host_path.c_str(), &st) == 0) {
            owners.push_back(MountOwner{mount.host_path, static_cast<int>(st.st_uid), static_cast<int>(st.st_gid)});
        } else if (errno == ENOENT) {
            // Not created yet (--preview): it will get the owner creation gives it.
            const auto owner = policy::created_directory_owner();
            owners.push_back(MountOwner{mount.host_path, owner.uid, owner.gid});
        } else {
            throw Error(fmt::format("cannot read the owner of {}: {}", mount.host_path, std::strerror(errno)));
        }
    }
    return owners;
}

void check_subordinate_ids(const IdentityMap& map) {
    // newuidmap(1) lets root map only the ids /etc/subuid and /etc/subgid give
    // it; without them the start fails with "uid range ... not allowed".
    for (auto [file, id, what] :
         {std::tuple{"/etc/subuid", map.host_uid, "uid"}, std::tuple{"/etc/subgid", map.host_gid, "gid"}}) {
        std::error_code ec;
        if (!std::filesystem::exists(file, ec)) continue;  // no shadow ranges: Incus maps directly
        if (subordinate_ids_allow(core::read_file(file), id)) continue;
        throw Error(
            fmt::format("{} does not let root map host {} {}, the owner of the writable mounts", file, what, id),
            fmt::format("as root, once: echo root:{}:1 >>{} (see docs/setup-incus.md)", id, file));
    }
}

Ipv4Net IncusProvider::choose_subnet() {
    const auto pool_text = setting(m_context, "incus.subnetPool", std::string(k_default_pool));
    auto pool = parse_ipv4_net(pool_text);
    if (!pool) {
        throw Error(fmt::format("setting incus.subnetPool: \"{}\" is not an IPv4 network", pool_text),
                    "use CIDR notation, e.g. agentctl config set incus.subnetPool=10.213.0.0/16");
    }
    const auto prefix_text = setting(m_context, "incus.subnetPrefix", std::to_string(k_default_subnet_prefix));
    int prefix = 0;
    try {
        prefix = std::stoi(prefix_text);
    } catch (const std::exception&) {
        throw Error(fmt::format("setting incus.subnetPrefix: \"{}\" is not a number", prefix_text),
                    "use a prefix length such as 28");
    }
    auto used = host_ipv4_networks();
    for (const auto& network : m_api.networks()) {
        const auto& config = network.value("config", Json::object());
        auto address = config.value("ipv4.address", std::string());
        if (auto net = parse_ipv4_net(address)) used.push_back(*net);
    }
    return pick_subnet(*pool, prefix, used);
}

AclRules IncusProvider::plan_acl(const std::string& sandbox, const policy::NetworkPolicy& network,
                                 const Ipv4Net& subnet, ProxyPlacement placement, bool report) {
    AclContext context{subnet.host(1).address_text(), k_egress_proxy_port, policy::host_own_addresses(), {}, {}, {}};
    if (placement == ProxyPlacement::Instance) {
        context.proxy_instance = proxy_address(placement, subnet).address_text();
        context.sandbox = subnet.host(2).address_text();
        // Other sandboxes' bridges are carved from this pool.
        if (auto pool = parse_ipv4_net(setting(m_context, "incus.subnetPool", std::string(k_default_pool)))) {
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
                                          const AclRules& rules) {
    FirewallSpec spec{
        bridge, subnet.host(1).address_text(), k_egress_proxy_port, egress(placement).proxy_uid(), rules.direct, {},
        {}};
    if (placement == ProxyPlacement::Instance) {
        spec.proxy_instance = proxy_address(placement, subnet).address_text();
        spec.sandbox = subnet.host(2).address_text();
    }
    return spec;
}

// The image a create starts from: --image, else the incus.image setting; a
// local alias must exist (a fingerprint is left to Incus to judge).
std::string IncusProvider::image_for(const SandboxSpec& spec) {
    auto image = spec.image.empty() ? setting(m_context, "incus.image", "") : spec.image;
    if (image.empty()) {
        throw Error("no image to create the sandbox from",
                    "give --image REF, or set a default: agentctl config set incus.image=agentctl-debian-12");
    }
    if (!is_image_fingerprint(image) && !m_api.preview() && !m_api.image_alias(image)) {
        throw Error(fmt::format("the image \"{}\" is not in Incus's local image store{}", image,
                                spec.image.empty() ? " (the incus.image setting)" : ""),
                    fmt::format("build it here (Debian 12 with debootstrap, a few minutes, as root): agentctl image "
                                "build {}; or pick an image you have: --image REF, or agentctl config set "
                                "incus.image=REF (`incus image list` shows them)",
                                image));
    }
    return image;
}

std::string IncusProvider::place(const SandboxSpec& spec) {
    // Under --preview without a daemon to ask, the target is printed as given.
    if (!m_api.server().is_object()) return spec.target;
    PlacementRequest request;
    request.clustered = m_api.clustered();
    if (request.clustered) request.members = parse_cluster_members(m_api.cluster_members());
    request.target = spec.target;
    request.own_addresses = policy::host_own_addresses();
    // With the proxy on the host the sandbox must run on this machine. A proxy
    // placed as an instance on the sandbox's own network
    // (incus.proxyPlacement=instance) goes wherever the sandbox goes; then any
    // member will do.
    request.needs_this_machine = spec.network.enabled && placement_setting() == ProxyPlacement::Host;
    return plan_placement(request);
}

void IncusProvider::create_bridge(const Json& network, const std::string& target) {
    // A bridge is local to each member: Incus wants it defined on every member
    // first (only member-specific keys), then created with the rest of its
    // config, which instantiates it everywhere (doc/howto/network_create.md).
    // A preview does not ask the server (it plans the same on every host), but
    // a --target means a cluster: it shows the definition on that member.
    if (m_api.clustered() || (m_api.preview() && !target.empty())) {
        auto members = parse_cluster_members(m_api.cluster_members());
        if (members.empty() && m_api.preview()) members.push_back(ClusterMember{target, "", ""});
        for (const auto& member : members) m_api.create_network(pending_network_payload(network), member.name);
    }
    m_api.create_network(network);
}

std::string IncusProvider::plan_dns_servers(const policy::NetworkPolicy& network) {
    const auto resolv = core::read_file_if_exists("/etc/resolv.conf").value_or("");
    const auto upstreams = dns_upstreams(network, resolv);
    if (upstreams.empty() && !network.dns.disabled) {
        m_context.reporter.warning(
            "no DNS upstream for the sandbox's resolver (no IP address in network.dns.servers or "
            "/etc/resolv.conf): allowlisted names do not resolve inside it; the egress proxy still reaches them");
    }
    return dns_server_lines(network, upstreams);
}

std::string IncusProvider::plan_dnsmasq(const policy::NetworkPolicy& network) {
    return "no-resolv\n" + plan_dns_servers(network) + "address=/#/\n";
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
    if (host.host_firewall()) host.install_firewall(firewall_spec(site.bridge, site.subnet, placement, rules));
    host.write_policy(site.sandbox, network);
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
        if (resolver_spec) host.start_resolver(site.sandbox, *resolver_spec, false);
        host.start_proxy(site);
    };
    if (!background) {
        services_up();
        return {};
    }
    // Until they listen the sandbox simply has no egress (nothing else is admitted).
    return std::async(std::launch::async, services_up);
}

void IncusProvider::stop_egress_services(const std::string& name, EgressHost& host) {
    if (host.stop_proxy(name)) m_context.reporter.step(fmt::format("stopped the egress proxy of {}", name));
    if (host.stop_resolver(name)) m_context.reporter.step(fmt::format("stopped the resolver of {}", name));
}

void IncusProvider::restore_egress(const std::string& name, const Json& instance) {
    const auto text = config_value(instance, key::k_network);
    if (text.empty()) return;
    const auto network = policy::from_policy_file(Json::parse(text));
    const auto site = site_of(name, instance);
    if (site.subnet.prefix == 0) return;
    const auto placement = placement_of(instance);
    const auto resolver = recorded_resolver(instance);
    if (!network.enabled) {
        // No policy (it was detached), but agentctl's resolver still serves DHCP and DNS.
        if (resolver == BridgeResolver::Host) {
            egress(placement).start_resolver(name, plan_resolver(site.bridge, site.subnet, network), false);
        }
        return;
    }
    const auto rules = plan_acl(name, network, site.subnet, placement, false);
    (void)egress_up(site, placement, network, rules, resolver, false);
}

void IncusProvider::add_egress_lines(const Json& instance, InstanceInfo& info) const {
    if (!info.network || !info.network->enabled) return;
    const auto gateway = parse_ipv4_net(config_value(instance, key::k_subnet));
    if (!gateway) return;
    const auto placement = placement_of(instance);
    auto& host = egress(placement);
    const auto status = host.proxy_status(site_of(info.name, instance));
    const auto restart = fmt::format("`agentctl start {}` restarts it", info.name);
    if (placement == ProxyPlacement::Instance) {
        info.extra.emplace_back("Egress proxy",
                                status.pid > 0
                                    ? fmt::format("{} (instance {}, running, pid {} there, as nobody)", status.listen,
                                                  status.instance, status.pid)
                                    : fmt::format("{} (instance {}, NOT running: {}; the sandbox has no egress; {})",
                                                  status.listen, status.instance, status.problem, restart));
        info.extra.emplace_back("Host firewall", host.host_firewall()
                                                     ? "nft table inet " + firewall_table(bridge_name(info.name))
                                                     : "none: the Incus server is not this machine (the bridge ACL "
                                                       "is the only enforcement point)");
    } else {
        info.extra.emplace_back(
            "Egress proxy",
            status.pid > 0 ? fmt::format("{} (running, pid {}, as nobody)", status.listen, status.pid)
                           : fmt::format("{} (NOT running: the sandbox has no egress; {})", status.listen, restart));
    }
    if (!status.log_path.empty()) info.extra.emplace_back("Egress log", status.log_path);
    const auto scope =
        info.network->dns.disabled ? "answers no name: network.dns.disabled" : "answers allowlisted names only";
    if (recorded_resolver(instance) == BridgeResolver::Host) {
        const int pid = m_egress->resolver_pid(info.name);
        info.extra.emplace_back(
            "Resolver",
            pid > 0 ? fmt::format("{} ({}; agentctl's dnsmasq, pid {}, as nobody)", gateway->address_text(), scope, pid)
                    : fmt::format("{} (NOT running: the sandbox has no DNS or DHCP; `agentctl start {}` "
                                  "restarts it)",
                                  gateway->address_text(), info.name));
    } else {
        info.extra.emplace_back("Resolver",
                                fmt::format("{} ({}; the bridge's dnsmasq)", gateway->address_text(), scope));
    }
    const auto resolve = m_context.settings.find("incus.proxyResolveFile");
    if (resolve != m_context.settings.end() && !resolve->second.empty()) {
        info.extra.emplace_back("Proxy names",
                                "resolved from " + resolve->second + " before DNS (incus.proxyResolveFile)");
    }
}

void IncusProvider::refuse_mounts_elsewhere(const std::vector<Mount>& mounts) const {
    if (mounts.empty() || server_is_this_machine()) return;
    throw Error(fmt::format("the Incus server of remote {} is not this machine, so host directories cannot be "
                            "mounted: {} would be a path on the server, not here",
                            m_server.remote, mounts.front().host_path),
                "pass --mount-none (and copy files in with `agentctl exec`), or use a remote that runs on this "
                "machine");
}

void IncusProvider::create(const SandboxSpec& requested) {
    check_sandbox_name(requested.name);
    m_api.require_extensions();
    SandboxSpec spec = requested;
    spec.image = image_for(requested);
    if (spec.isolation == Isolation::Vm && !m_api.supports_vms()) {
        throw Error(fmt::format("this host cannot run Incus virtual machines (the daemon's drivers: {})",
                                m_api.server().value("environment", Json::object()).value("driver", "?")),
                    "run the sandbox as a container instead: --isolation container "
                    "(or spec.isolation: container in a profile); it shares the host kernel");
    }
    if (m_api.instance(spec.name)) {
        throw Error(fmt::format("a sandbox named \"{}\" already exists", spec.name),
                    "pick another name, or remove it first: agentctl delete " + spec.name);
    }
    refuse_mounts_elsewhere(spec.mounts);
    // A published port listens on the server: only this machine's ports can be checked here.
    if (server_is_this_machine()) {
        for (const auto& port : spec.ports) check_host_port_free(port);
    }
    spec.target = place(spec);

    // Leftovers of an interrupted create (no instance, but our bridge or ACL).
    if (!m_api.preview() && remove_pieces(spec.name) > 0) {
        m_context.reporter.step(fmt::format("removed leftovers of an earlier, unfinished create of {}", spec.name));
    }
    try {
        create_pieces(spec);
    } catch (...) {
        m_context.reporter.fail_step();
        if (!m_api.preview()) {
            m_context.reporter.notice(fmt::format("create failed; removing what was made for {}", spec.name));
            try {
                remove_pieces(spec.name);
                // Ends the last cleanup step as done: the error printed next is the create's.
                m_context.reporter.notice(fmt::format("removed what was made for {}", spec.name));
            } catch (const std::exception& cleanup) {
                m_context.reporter.warning(fmt::format("cleanup of {} failed: {} (run agentctl delete {})", spec.name,
                                                       cleanup.what(), spec.name));
            }
        }
        throw;
    }
}

void IncusProvider::create_pieces(const SandboxSpec& spec) {
    // Who the sandbox user stands for on the host, checked before anything is made.
    const auto owners = writable_mount_owners(spec.mounts);
    const int guest_uid = guest_uid_for(owners);
    const auto idmap = plan_identity_map(owners, guest_uid);
    if (idmap && !m_api.preview()) check_subordinate_ids(*idmap);
    const auto bridge = bridge_name(spec.name);
    const bool confined = spec.network.enabled;
    const auto placement = placement_setting();
    if (confined && placement == ProxyPlacement::Instance && companion_name(spec.name).size() > 63) {
        throw Error(fmt::format("the sandbox name \"{}\" is too long for its egress proxy instance {}", spec.name,
                                companion_name(spec.name)),
                    "use a name of at most 56 characters");
    }
    const auto resolver = resolver_for(confined, placement);
    Ipv4Net subnet;
    AclRules rules;
    {
        // Serialise subnet choice and bridge creation between agentctl processes.
        std::optional<core::FileLock> lock;
        if (!m_api.preview()) lock.emplace(lock_path(m_context));
        subnet = choose_subnet();
        if (confined) {
            rules = plan_acl(spec.name, spec.network, subnet.host(1), placement);
            m_context.reporter.step(
                fmt::format("creating network ACL {} ({} rules)", acl_name(spec.name), rules.egress.size()));
            m_api.create_acl(acl_payload(spec.name, rules));
        }
        m_context.reporter.step(fmt::format("creating bridge {} ({})", bridge, subnet.host(1).to_string()));
        auto network = network_payload(spec.name, bridge, subnet, confined ? acl_name(spec.name) : "", resolver);
        if (confined && resolver == BridgeResolver::Incus)
            network["config"]["raw.dnsmasq"] = plan_dnsmasq(spec.network);
        create_bridge(network, spec.target);
    }
    // The host side before the guest exists: no moment without enforcement.
    // Resolver and proxy come up while the instance is created.
    // (Instance placement: the companion comes up on the bridge meanwhile.)
    const auto proxy_at = proxy_address(placement, subnet.host(1)).address_text();
    std::future<void> proxy;
    if (confined) {
        proxy = egress_up(EgressSite{spec.name, bridge, subnet.host(1), spec.image}, placement, spec.network, rules,
                          resolver, !m_api.preview());
    }

    auto config = instance_config(spec, bridge, subnet, confined, idmap);
    if (confined) config[std::string(key::k_egress)] = std::string(to_string(placement));
    const auto pool = setting(m_context, "incus.storagePool", "default");
    auto devices = instance_devices(spec, bridge, pool);
    confine_instance(config, devices, subnet, confined, proxy_at, k_egress_proxy_port, spec.isolation);
    config[std::string(key::k_resolver)] = resolver_record(resolver);
    auto payload = instance_payload(spec, config, devices, true);
    m_context.reporter.step(fmt::format("creating {} {} from image {}{}",
                                        spec.isolation == Isolation::Vm ? "virtual machine" : "container", spec.name,
                                        spec.image, spec.target.empty() ? "" : " on cluster member " + spec.target));
    m_api.create_instance(payload, k_create_timeout, spec.target);
    if (proxy.valid()) proxy.get();

    // The user: bootstrap right away, so everything later runs as it. The
    // probe battery needs neither user nor guest settings: it runs meanwhile.
    wait_until_ready(spec.name, spec.isolation == Isolation::Vm);
    std::future<ProbeRun> probes;
    if (confined && !m_api.preview()) {
        probes = std::async(std::launch::async, [this, name = spec.name, instance = require_instance(spec.name)] {
            return run_probe_battery(name, instance);
        });
    }
    m_context.reporter.step(fmt::format("creating user {}", spec.user));
    std::string script = bootstrap_user_script(spec.user, guest_uid);
    if (confined)
        script =
            with_proxy_setup(script, proxy_setup_script(proxy_at, k_egress_proxy_port, subnet.host(1).address_text()));
    auto result = run_as_root(spec.name, script, 120);
    auto user = parse_bootstrap_output(result.out);
    if (!user) {
        if (!m_api.preview()) {
            throw Error(fmt::format("creating user {} in {} failed (exit {}): {}", spec.user, spec.name,
                                    result.exit_code, result.err.empty() ? result.out : result.err),
                        "the image needs useradd or busybox adduser; try another --image");
        }
        user = GuestUser{spec.user, guest_uid, guest_uid, "/home/" + spec.user, "/bin/bash"};
    }
    if (idmap && (user->uid != guest_uid || user->gid != guest_uid)) {
        throw Error(fmt::format("the sandbox user {} has uid {} gid {} in {}, but the writable mounts are mapped to "
                                "uid {}: the image already uses that id",
                                spec.user, user->uid, user->gid, spec.name, guest_uid),
                    "use an image that has no user with that id");
    }
    if (confined && !m_api.preview() && result.out.find("agentctl-proxy-configured") == std::string::npos) {
        throw Error(fmt::format("configuring the egress proxy in {} failed (exit {}): {}", spec.name, result.exit_code,
                                result.err),
                    "the image needs a POSIX shell, sed and grep");
    }
    set_records(spec.name, {{std::string(key::k_uid), std::to_string(user->uid)},
                            {std::string(key::k_gid), std::to_string(user->gid)},
                            {std::string(key::k_home), user->home},
                            {std::string(key::k_shell), user->shell}});
    after_boot(spec.name, true, std::move(probes));
}

int IncusProvider::remove_pieces(const std::string& name) {
    int found = 0;
    // A create that failed after booting leaves the instance running, and Incus
    // deletes only stopped instances. (Callers have checked that it is ours.)
    const auto instance = m_api.instance(name);
    if (instance && running(*instance)) m_api.change_state(name, state_payload("stop", true, -1), 120);
    // A preview asks for the companion only when the sandbox records one; a
    // real delete always looks (a create may have stopped before recording).
    const bool companion = !m_api.preview() || (instance && placement_of(*instance) == ProxyPlacement::Instance);
    if (m_api.delete_instance(name)) ++found;
    const auto bridge = bridge_name(name);
    stop_egress_services(name, *m_egress);
    // The companion instance (instance placement) goes before its bridge can.
    if (companion) m_egress_instance->remove_state(name);
    auto network = m_api.network(bridge);
    // A create killed while Incus was still setting the bridge up leaves it
    // "Pending"; deleting it then would orphan its dnsmasq. Let it finish first.
    // In a cluster, a create killed between the per-member definitions and the
    // global create leaves it pending for good, without config: Incus refuses
    // every key but the member-specific ones on a pending definition, so only
    // its name (agentctl's, derived from the sandbox's) says whose it is.
    const auto owner_of = [](const Json& net) {
        return net.value("config", Json::object()).value(std::string(key::k_sandbox), "");
    };
    const auto pending = [](const Json& net) { return net.value("status", "") == "Pending"; };
    const auto never_created = [&](const Json& net) { return pending(net) && owner_of(net).empty(); };
    for (int i = 0; i < 300 && network && pending(*network) && !never_created(*network); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        network = m_api.network(bridge);
    }
    if (network) {
        const auto owner = owner_of(*network);
        if (owner == name || never_created(*network)) {
            m_context.reporter.step(fmt::format("deleting bridge {}", bridge));
            m_api.delete_network(bridge);
            ++found;
        } else {
            m_context.reporter.warning(
                fmt::format("network {} belongs to \"{}\", not to {}; left alone", bridge, owner, name));
        }
    }
    m_egress->remove_firewall(bridge);
    m_egress->remove_state(name);
    if (auto acl = m_api.acl(acl_name(name))) {
        const auto owner = acl->value("config", Json::object()).value(std::string(key::k_sandbox), "");
        if (owner == name) {
            m_context.reporter.step(fmt::format("deleting network ACL {}", acl_name(name)));
            m_api.delete_acl(acl_name(name));
            ++found;
        } else {
            m_context.reporter.warning(
                fmt::format("network ACL {} was not made by agentctl; left alone", acl_name(name)));
        }
    }
    return found;
}

void IncusProvider::remove(const std::string& name, bool force) {
    // An agentctl killed mid-create leaves its operations running in the
    // daemon, and while they run the instance is busy and its bridge in use:
    // wait for them and retry, for a bounded time.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    for (;;) {
        try {
            if (m_api.wait_for_instance_operations(name, 120) > 0) {
                m_context.reporter.step(fmt::format("waited for an unfinished operation on {}", name));
            }
            remove_once(name, force);
            return;
        } catch (const NotFound&) {
            throw;
        } catch (const Error& e) {
            const std::string_view text = e.what();
            const bool transient =
                text.find("is busy") != std::string_view::npos || text.find("in use") != std::string_view::npos;
            if (!transient || std::chrono::steady_clock::now() >= deadline) throw;
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
    }
}

void IncusProvider::remove_once(const std::string& name, bool force) {
    if (auto instance = m_api.instance(name)) {
        if (config_value(*instance, key::k_role) == key::k_role_egress_proxy) {
            throw Error(fmt::format("the Incus instance \"{}\" is the egress proxy of sandbox {}, not a sandbox", name,
                                    config_value(*instance, key::k_sandbox)),
                        "delete the sandbox: agentctl delete " + config_value(*instance, key::k_sandbox));
        }
        if (config_value(*instance, key::k_managed) != "true") {
            throw Error(fmt::format("the Incus instance \"{}\" was not created by agentctl", name),
                        "agentctl only deletes its own sandboxes; use `incus delete` for others");
        }
        if (running(*instance)) {
            if (!force) {
                throw Error(fmt::format("sandbox {} is running", name),
                            "stop it first (agentctl stop " + name + ") or pass --force");
            }
            m_context.reporter.step(fmt::format("stopping {}", name));
            m_api.change_state(name, state_payload("stop", true, -1), 120);
        }
        m_context.reporter.step(fmt::format("deleting instance {}", name));
    }
    if (remove_pieces(name) == 0 && !m_api.preview()) {
        throw Error(fmt::format("no sandbox named \"{}\" in Incus (no instance, bridge or ACL)", name),
                    "`agentctl list` shows the sandboxes");
    }
}

void IncusProvider::apply_network_policy(const std::string& name, const policy::NetworkPolicy& network) {
    auto instance = require_instance(name);
    const auto bridge = bridge_name(name);
    const auto acl = acl_name(name);
    auto site = site_of(name, instance);
    if (site.subnet.prefix == 0) {
        if (!m_api.preview()) throw Error(fmt::format("{} has no bridge address recorded; recreate it", name));
        site.subnet = *parse_ipv4_net("10.0.0.1/28");
    }
    const auto placement = placement_of(instance);
    auto& host = egress(placement);
    std::optional<policy::NetworkPolicy> old;
    try {
        old = policy::from_policy_file(Json::parse(config_value(instance, key::k_network)));
    } catch (const std::exception&) {
        old.reset();
    }
    const auto resolver = recorded_resolver(instance);
    // agentctl's resolver takes the new allowlist by a restart (milliseconds).
    auto restart_resolver = [&] {
        if (resolver != BridgeResolver::Host) return;
        m_context.reporter.step(fmt::format("restarting the resolver of {}", name));
        host.start_resolver(name, plan_resolver(bridge, site.subnet, network), true);
    };
    if (network.enabled) {
        auto rules = plan_acl(name, network, site.subnet, placement);
        auto payload = acl_payload(name, rules);
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
        m_api.patch_network_config(bridge, bridge_patch);
        restart_resolver();
        m_context.reporter.step(fmt::format("reloading the egress proxy of {}", name));
        if (host.host_firewall()) host.install_firewall(firewall_spec(bridge, site.subnet, placement, rules));
        host.write_policy(name, network);
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
            const auto guest = wait_for_address(name, 0);
            if (!removed.empty() && !guest.empty()) {
                auto problem = host.forget_connections({guest}, removed);
                if (!problem.empty()) m_context.reporter.warning(fmt::format("{}: {}", name, problem));
            }
        }
    } else {
        m_context.reporter.step(fmt::format("detaching network ACL {}: egress is now unrestricted", acl));
        Json bridge_patch{{"security.acls", ""}};
        if (resolver == BridgeResolver::Incus) bridge_patch["raw.dnsmasq"] = "";
        m_api.patch_network_config(bridge, bridge_patch);
        m_api.delete_acl(acl);
        host.write_policy(name, network);
        restart_resolver();
    }
    // The recorded widenings follow the new policy.
    SandboxSpec view;
    view.network = network;
    view.mounts = parse_mounts_record(config_value(instance, key::k_mounts));
    view.ports = parse_ports_record(config_value(instance, key::k_ports));
    view.isolation = config_value(instance, key::k_isolation) == "vm" ? Isolation::Vm : Isolation::Container;
    set_records(name, {{std::string(key::k_network), policy::to_policy_file(network).dump()},
                       {std::string(key::k_acl), network.enabled ? acl : ""},
                       {std::string(key::k_widenings), Json(widenings(view)).dump()},
                       {std::string(key::k_confinement), ""}});
    if (running(instance) && !m_api.preview()) verify_confinement(name, require_instance(name));
}

}  // namespace agentctl::provider::incus
