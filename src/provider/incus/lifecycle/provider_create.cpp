// create: the sandbox, its bridge and subnet.
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <tuple>
#include <thread>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/host_network.hpp"
#include "core/files.hpp"
#include "provider/common/agent_install.hpp"
#include "provider/common/failed_create.hpp"
#include "provider/incus/client/cluster.hpp"
#include "provider/incus/lifecycle/image_bootstrap.hpp"
#include "provider/incus/guest/guest_proxy_scripts.hpp"
#include "provider/incus/guest/guest_scripts.hpp"
#include "provider/incus/network/host_ports.hpp"
#include "egress_proxy/sandbox_ca.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/common/sandbox_secrets.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"

namespace agentctl::provider::incus {
namespace {

// The sandbox user must have the uid and gid its writable mounts are mapped to
// (create checks the user it predicts before anything is made, then the one it got).
void refuse_uid_clash(const std::string& sandbox, const GuestUser& user, int guest_uid) {
    if (user.uid == guest_uid && user.gid == guest_uid) return;
    throw Error(fmt::format("the sandbox user {} has uid {} gid {} in {}, but the writable mounts are mapped to "
                            "uid {}: the image already uses that id",
                            user.name, user.uid, user.gid, sandbox, guest_uid),
                "use an image that has no user with that id");
}

Error already_exists(const std::string& sandbox) {
    return Error(fmt::format("a sandbox named \"{}\" already exists", sandbox),
                 "pick another name, or remove it first: agentctl delete " + sandbox);
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
    const auto pool_text = setting(m_context, config_key::k_subnet_pool);
    auto pool = parse_ipv4_net(pool_text);
    if (!pool) {
        throw Error(fmt::format("setting incus.subnetPool: \"{}\" is not an IPv4 network", pool_text),
                    "use CIDR notation, e.g. agentctl config set incus.subnetPool=10.213.0.0/16");
    }
    const auto prefix_text = setting(m_context, config_key::k_subnet_prefix);
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

HostRecord IncusProvider::new_host_record(const std::string& name) {
    const auto known = m_api.preview() ? std::function<bool(uid_t)>([](uid_t) { return false; })
                                       : std::function<bool(uid_t)>(&id_known_on_host);
    return HostRecord{pick_host_id(m_api.networks(), known), default_state_dir(m_context, name)};
}

std::unique_ptr<core::FileLock> IncusProvider::lock_network() const {
    if (m_api.preview()) return nullptr;
    return std::make_unique<core::FileLock>(host_network_lock_path(m_context.host_lock_dir));
}

std::function<void(const PortForward&)> IncusProvider::port_wait_notice() const {
    return [this](const PortForward& port) {
        m_context.reporter.notice(
            fmt::format("waiting for another agentctl that publishes host port {}/{}", port.host_port, port.protocol));
    };
}

std::unique_ptr<core::FileLock> IncusProvider::lock_sandbox(const std::string& name) const {
    if (m_api.preview()) return nullptr;
    return std::make_unique<core::FileLock>(host_sandbox_lock_path(m_context.host_lock_dir, name), [&] {
        m_context.reporter.notice(fmt::format("waiting for another agentctl that is working on {}", name));
    });
}

void IncusProvider::patch_bridge(const std::string& bridge, const Json& config) {
    const auto lock = lock_network();
    m_api.patch_network_config(bridge, config);
}

HostRecord IncusProvider::record_host_user(const std::string& name) {
    const auto lock = lock_network();
    const auto host = new_host_record(name);
    m_context.reporter.step(fmt::format("giving the host processes of {} a uid of their own ({})", name, host.uid));
    const auto record = host_record_config(host);
    m_api.patch_network_config(bridge_name(name), Json(record));
    set_records(name, record);
    return host;
}

std::string IncusProvider::image_for(const SandboxSpec& spec) {
    auto image = spec.image.empty() ? setting(m_context, config_key::k_image) : spec.image;
    // A preview asks too, when there is a daemon to ask (without one it plans on paper).
    const bool can_ask = !m_api.preview() || m_api.server().is_object();
    if (!is_image_fingerprint(image) && can_ask && !m_api.image_alias(image)) {
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

void IncusProvider::refuse_agent_without_tools(const SandboxSpec& spec, const std::optional<Json>& image) {
    // An image built by agentctl lists its packages; any other image is asked
    // from inside, right before the install (provider_lifecycle.cpp).
    const auto packages =
        image ? string_property(image->value("properties", Json::object()), k_image_packages_property) : std::nullopt;
    const auto& agent = policy::find_agent(spec.agent);
    const auto missing = common::tools_missing_from_image(agent, packages, spec.packages);
    if (missing && !missing->empty()) {
        throw common::agent_tools_missing(spec.agent, fmt::format("the image {}", spec.image), *missing);
    }
}

void IncusProvider::refuse_uid_clash_early(const SandboxSpec& spec, const std::optional<Json>& image) {
    const auto owners = writable_mount_owners(spec.mounts);
    const int guest_uid = guest_uid_for(owners);
    if (!plan_identity_map(owners, guest_uid)) return;  // no writable mount: any uid will do
    if (!image) return;  // not asked (a preview without a daemon): create checks the user it gets
    const auto accounts = recorded_accounts(*image);
    if (accounts) {
        refuse_uid_clash(spec.name, predict_bootstrap_user(*accounts, spec.user, guest_uid), guest_uid);
    } else if (m_api.preview()) {
        m_context.reporter.warning(
            fmt::format("cannot tell before the sandbox exists whether its user {} gets uid {}: the image {} does not "
                        "record its accounts (images made by `agentctl image build` do); create checks it then",
                        spec.user, guest_uid, spec.image));
    }
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
    if (requested.name.starts_with(k_pool_prefix)) {
        throw Error(fmt::format("sandbox names starting with {} are the warm pool's", k_pool_prefix),
                    "pick another name");
    }
    const auto lock = lock_sandbox(requested.name);
    m_api.require_extensions();
    const auto existing = m_api.instance(requested.name);
    // One a create that was killed left goes with the rest of its pieces (make_sandbox).
    const bool unfinished = existing && read_instance_marks(*existing).unfinished() && !m_api.preview();
    if (existing && !unfinished) throw already_exists(requested.name);
    // A sandbox taken from the pool has the name only in its record.
    if (const auto taken =
            m_api.preview() ? std::vector<Instance>{} : m_api.instances_where(key::k_name, requested.name);
        !taken.empty()) {
        if (!read_instance_marks(taken.front()).unfinished()) throw already_exists(requested.name);
        // Left by a create that was killed while it took a pool entry.
        m_context.reporter.step(fmt::format("removing what an earlier, unfinished create of {} left", requested.name));
        const auto entry_lock = lock_sandbox(taken.front().name);
        remove_pieces(taken.front().name);
    }
    if (existing || !take_from_pool(requested)) make_sandbox(requested, {});
    if (!m_api.preview() && pool_size() > 0) refill_in_background();
}

void IncusProvider::make_sandbox(const SandboxSpec& requested, const std::map<std::string, std::string>& marks) {
    auto existing = m_api.instance(requested.name);
    if (existing && read_instance_marks(*existing).unfinished() && !m_api.preview()) {
        // Left by a create that was killed (the name's lock is ours now): removed below with the rest.
        existing.reset();
    }
    if (existing) throw already_exists(requested.name);
    refuse_name_of_other_project(requested.name);
    SandboxSpec spec = requested;
    spec.image = image_for(requested);
    if (spec.isolation == Isolation::Vm && !m_api.supports_vms()) {
        throw Error(fmt::format("this host cannot run Incus virtual machines (the daemon's drivers: {})",
                                m_api.server().value("environment", Json::object()).value("driver", "?")),
                    "run the sandbox as a container instead: --isolation container "
                    "(or spec.isolation: container in a profile); it shares the host kernel");
    }
    refuse_mounts_elsewhere(spec.mounts);
    const auto image = m_api.image(spec.image);
    if (!spec.agent.empty()) refuse_agent_without_tools(spec, image);
    refuse_uid_clash_early(spec, image);
    // A published port listens on the server: only this machine's ports can be checked here.
    std::vector<std::unique_ptr<core::FileLock>> reserved;
    if (server_is_this_machine()) {
        if (!m_api.preview()) reserved = reserve_host_ports(m_context.host_lock_dir, spec.ports, port_wait_notice());
        for (const auto& port : spec.ports) check_host_port_free(port);
    }
    spec.target = place(spec);

    // Leftovers of an interrupted create (no instance, but our bridge or ACL).
    if (!m_api.preview() && remove_pieces(spec.name) > 0) {
        m_context.reporter.step(fmt::format("removed leftovers of an earlier, unfinished create of {}", spec.name));
    }
    try {
        create_pieces(spec, marks);
        if (!m_api.preview()) set_records(spec.name, {{std::string(key::k_create_pending), ""}});
    } catch (...) {
        m_context.reporter.fail_step();
        if (!m_api.preview()) {
            common::undo_failed_create(
                m_context.reporter, spec.name, spec.keep_on_failure, [&] { remove_pieces(spec.name); },
                "agentctl delete " + spec.name);
        }
        throw;
    }
}

void IncusProvider::create_pieces(const SandboxSpec& spec, const std::map<std::string, std::string>& marks) {
    // Who the sandbox user stands for on the host, checked before anything is made.
    const auto owners = writable_mount_owners(spec.mounts);
    const int guest_uid = guest_uid_for(owners);
    const auto idmap = plan_identity_map(owners, guest_uid);
    if (idmap && !m_api.preview()) check_subordinate_ids(*idmap);
    const auto bridge = bridge_name(spec.name);
    const bool confined = spec.network.enabled;
    const auto placement = placement_setting();
    if (!spec.secrets.empty() && placement == ProxyPlacement::Instance) {
        throw Error(fmt::format("sandbox {}: secrets are injected by an egress proxy on this host, and this sandbox's "
                                "proxy would run in a companion instance (incus.proxyPlacement)",
                                spec.name),
                    "agentctl config set incus.proxyPlacement=host (the Incus server must be this machine)");
    }
    if (confined && placement == ProxyPlacement::Instance && companion_name(spec.name).size() > 63) {
        throw Error(fmt::format("the sandbox name \"{}\" is too long for its egress proxy instance {}", spec.name,
                                companion_name(spec.name)),
                    "use a name of at most 56 characters");
    }
    const auto resolver = resolver_for(confined, placement);
    Ipv4Net subnet;
    AclRules rules;
    HostRecord host;
    {
        // The subnet and the uid of the sandbox's host processes
        // (host_user.hpp) are chosen under the host's network lock, held until
        // the bridge that records them exists.
        const auto lock = lock_network();
        if (confined && server_is_this_machine()) host = new_host_record(spec.name);
        subnet = choose_subnet();
        if (confined) {
            rules = plan_acl(spec.name, spec.network, subnet.host(1), placement);
            m_context.reporter.step(
                fmt::format("creating network ACL {} ({} rules)", acl_name(spec.name), rules.egress.size()));
            m_api.create_acl(in_project(acl_payload(spec.name, rules)));
        }
        m_context.reporter.step(fmt::format("creating bridge {} ({})", bridge, subnet.host(1).to_string()));
        auto network =
            in_project(network_payload(spec.name, bridge, subnet, confined ? acl_name(spec.name) : "", resolver));
        if (confined && resolver == BridgeResolver::Incus)
            network["config"]["raw.dnsmasq"] = plan_dnsmasq(spec.network);
        if (host.recorded()) network["config"].update(Json(host_record_config(host)));
        create_bridge(network, spec.target);
    }
    // The host side before the guest exists: no moment without enforcement.
    // Resolver and proxy come up while the instance is created.
    // (Instance placement: the companion comes up on the bridge meanwhile.)
    const auto proxy_at = proxy_address(placement, subnet.host(1)).address_text();
    // Secrets: placeholders and the sandbox CA exist before the proxy starts (it reads them).
    const auto secrets = common::plan_sandbox_secrets(spec.secrets);
    std::string ca_cert;
    if (!secrets.empty() && !m_api.preview()) {
        const std::filesystem::path dir = state_dir_of(m_context, host, spec.name);
        common::write_sandbox_secrets(dir, secrets);
        ca_cert = egress_proxy::load_or_make_sandbox_ca(dir, spec.name).cert;
    }
    std::future<void> proxy;
    if (confined) {
        proxy = egress_up(EgressSite{spec.name, bridge, subnet.host(1), spec.image, host}, placement, spec.network,
                          rules, resolver, !m_api.preview());
    }

    auto config = instance_config(spec, bridge, subnet, confined, idmap);
    if (confined) config[std::string(key::k_egress)] = std::string(to_string(placement));
    config[std::string(key::k_create_pending)] = "true";
    config.insert(marks.begin(), marks.end());
    if (host.recorded()) config.merge(host_record_config(host));
    const auto pool = setting(m_context, config_key::k_storage_pool);
    auto devices = instance_devices(spec, bridge, pool);
    confine_instance(config, devices, subnet, confined, proxy_at, k_egress_proxy_port, spec.isolation);
    const auto secret_env = common::secret_environment(secrets);
    for (const auto& [name, value] : secret_env) config["environment." + name] = value;
    config[std::string(key::k_resolver)] = resolver_record(resolver);
    // Only agentctl starts it (start_gate.hpp): this create's start has a pass.
    std::unique_ptr<StartPass> pass;
    if (gated(spec.isolation)) {
        config["raw.lxc"] = with_start_gate(config["raw.lxc"], start_pass(spec.name));
        pass = std::make_unique<StartPass>(start_pass(spec.name));
    }
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
        probes = std::async(std::launch::async,
                            [this, name = spec.name, record = read_sandbox_record(require_instance(spec.name))] {
                                return run_probe_battery(name, record);
                            });
    }
    m_context.reporter.step(fmt::format("creating user {}", spec.user));
    std::string script = bootstrap_user_script(spec.user, guest_uid);
    if (confined) {
        auto setup = proxy_setup_script(proxy_at, k_egress_proxy_port, subnet.host(1).address_text());
        if (!secrets.empty()) setup += "\n" + common::guest_secret_script(ca_cert, secret_env);
        script = with_proxy_setup(script, setup);
    }
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
    if (idmap) refuse_uid_clash(spec.name, *user, guest_uid);
    if (!secrets.empty() && !m_api.preview() && result.out.find(common::k_secrets_configured) == std::string::npos) {
        throw Error(fmt::format("installing the sandbox CA in {} failed (exit {}): {}", spec.name, result.exit_code,
                                result.err),
                    "the image needs a POSIX shell and sed");
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

}  // namespace agentctl::provider::incus
