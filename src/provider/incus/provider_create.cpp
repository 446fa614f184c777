// create, delete and the network policy: the bridge, its subnet and the ACL.
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <tuple>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
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
    std::filesystem::path dir = context.config_dir.empty() ? std::filesystem::temp_directory_path() / "agentctl"
                                                           : std::filesystem::path(context.config_dir);
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
            // Not created yet (--preview): it will belong to whoever runs agentctl.
            owners.push_back(MountOwner{mount.host_path, static_cast<int>(::geteuid()), static_cast<int>(::getegid())});
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

AclRules IncusProvider::plan_acl(const std::string& sandbox, const policy::NetworkPolicy& network) {
    auto resolved = resolve_allow_names(network, *m_resolver);
    auto rules = build_acl_rules(network, resolved);
    for (const auto& note : rules.notes) m_context.reporter.warning(fmt::format("{}: {}", sandbox, note));
    return rules;
}

void IncusProvider::create(const SandboxSpec& spec) {
    check_sandbox_name(spec.name);
    m_api.require_extensions();
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
    for (const auto& port : spec.ports) check_host_port_free(port);

    // Leftovers of an interrupted create (no instance, but our bridge or ACL).
    if (!m_api.preview() && remove_pieces(spec.name) > 0) {
        m_context.reporter.step(fmt::format("removed leftovers of an earlier, unfinished create of {}", spec.name));
    }
    try {
        create_pieces(spec);
    } catch (...) {
        if (!m_api.preview()) {
            m_context.reporter.step(fmt::format("create failed; removing what was made for {}", spec.name));
            try {
                remove_pieces(spec.name);
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
    const bool acl_attached = spec.network.enabled;
    Ipv4Net subnet;
    {
        // Serialise subnet choice and bridge creation between agentctl processes.
        std::optional<core::FileLock> lock;
        if (!m_api.preview()) lock.emplace(lock_path(m_context));
        if (acl_attached) {
            auto rules = plan_acl(spec.name, spec.network);
            m_context.reporter.step(
                fmt::format("creating network ACL {} ({} rules)", acl_name(spec.name), rules.egress.size()));
            m_api.create_acl(acl_payload(spec.name, rules));
        }
        subnet = choose_subnet();
        m_context.reporter.step(fmt::format("creating bridge {} ({})", bridge, subnet.host(1).to_string()));
        m_api.create_network(network_payload(spec.name, bridge, subnet, acl_attached ? acl_name(spec.name) : ""));
    }

    auto config = instance_config(spec, bridge, subnet, acl_attached, idmap);
    const auto pool = setting(m_context, "incus.storagePool", "default");
    auto payload = instance_payload(spec, config, instance_devices(spec, bridge, pool), true);
    m_context.reporter.step(fmt::format("creating {} {} from image {}",
                                        spec.isolation == Isolation::Vm ? "virtual machine" : "container", spec.name,
                                        spec.image));
    m_api.create_instance(payload, k_create_timeout);

    // The user: bootstrap right away, so everything later runs as it.
    wait_until_ready(spec.name, spec.isolation == Isolation::Vm);
    m_context.reporter.step(fmt::format("creating user {}", spec.user));
    auto result = run_as_root(spec.name, bootstrap_user_script(spec.user, guest_uid), 120);
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
    set_records(spec.name, {{std::string(key::k_uid), std::to_string(user->uid)},
                            {std::string(key::k_gid), std::to_string(user->gid)},
                            {std::string(key::k_home), user->home},
                            {std::string(key::k_shell), user->shell}});
    after_boot(spec.name, true);
}

int IncusProvider::remove_pieces(const std::string& name) {
    int found = 0;
    if (m_api.delete_instance(name)) ++found;
    const auto bridge = bridge_name(name);
    auto network = m_api.network(bridge);
    // A create killed while Incus was still setting the bridge up leaves it
    // "Pending"; deleting it then would orphan its dnsmasq. Let it finish first.
    for (int i = 0; i < 300 && network && network->value("status", "") == "Pending"; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        network = m_api.network(bridge);
    }
    if (network) {
        const auto owner = network->value("config", Json::object()).value(std::string(key::k_sandbox), "");
        if (owner == name) {
            m_context.reporter.step(fmt::format("deleting bridge {}", bridge));
            m_api.delete_network(bridge);
            ++found;
        } else {
            m_context.reporter.warning(
                fmt::format("network {} belongs to \"{}\", not to {}; left alone", bridge, owner, name));
        }
    }
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
    if (network.enabled) {
        auto payload = acl_payload(name, plan_acl(name, network));
        if (m_api.acl(acl)) {
            m_context.reporter.step(fmt::format("updating network ACL {} ({} rules)", acl, payload["egress"].size()));
            m_api.put_acl(acl, payload);
        } else {
            m_context.reporter.step(fmt::format("creating network ACL {}", acl));
            m_api.create_acl(payload);
        }
        m_api.patch_network_config(bridge, Json{{"security.acls", acl},
                                                {"security.acls.default.egress.action", "reject"},
                                                {"security.acls.default.ingress.action", "reject"}});
    } else {
        m_context.reporter.step(fmt::format("detaching network ACL {}: egress is now unrestricted", acl));
        m_api.patch_network_config(bridge, Json{{"security.acls", ""}});
        m_api.delete_acl(acl);
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
    if (running(instance) && !m_api.preview()) {
        // The new policy is live: check it the way start does.
        m_context.reporter.step(fmt::format("checking network confinement of {}", name));
        const auto confinement = check_confinement(name, require_instance(name));
        set_records(name, {{std::string(key::k_confinement), confinement}});
        if (confinement == "verified") {
            m_context.reporter.notice("network confinement verified");
        } else {
            m_context.reporter.warning(fmt::format("{}: network confinement {}", name, confinement));
        }
    }
}

}  // namespace agentctl::provider::incus
