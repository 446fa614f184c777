// Snapshots and images.
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/lifecycle/image_bootstrap.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"
#include "provider/incus/guest/provisioning.hpp"

namespace agentctl::provider::incus {
namespace {

void check_snapshot_name(const std::string& snapshot) {
    const bool ok = !snapshot.empty() && snapshot.size() <= 63 &&
                    snapshot.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
                        std::string::npos;
    if (!ok) {
        throw Error(fmt::format("invalid snapshot name \"{}\"", snapshot),
                    "use letters, digits, '-', '_' and '.', e.g. before-upgrade");
    }
}

// $XDG_CACHE_HOME/agentctl/images, else ~/.cache/agentctl/images.
std::string image_cache_dir() {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg != nullptr && *xdg == '/') return std::string(xdg) + "/agentctl/images";
    const char* home = std::getenv("HOME");
    return std::string(home != nullptr && *home != '\0' ? home : "/root") + "/.cache/agentctl/images";
}

}  // namespace

void IncusProvider::snapshot_create(const std::string& given, const std::string& snapshot) {
    const auto name = instance_of(given);
    check_snapshot_name(snapshot);
    require_instance(name);
    // Incus answers a taken name with its database's "UNIQUE constraint failed": say it first.
    for (const auto& taken : snapshot_list(name)) {
        if (taken.name == snapshot) {
            throw Error(
                fmt::format("sandbox {} already has a snapshot named {} (taken {})", name, snapshot, taken.created_at),
                fmt::format("pick another name, or delete it first: agentctl snapshot delete {} {}", name, snapshot));
        }
    }
    m_context.reporter.step(fmt::format("snapshotting {} as {}", name, snapshot));
    m_api.create_snapshot(name, snapshot);
}

std::vector<SnapshotInfo> IncusProvider::snapshot_list(const std::string& given) {
    const auto name = instance_of(given);
    require_instance(name);
    std::vector<SnapshotInfo> list;
    for (const auto& snap : m_api.snapshots(name)) {
        const auto& full = snap.name;
        list.push_back({full.substr(full.rfind('/') == std::string::npos ? 0 : full.rfind('/') + 1), snap.created_at,
                        snap.stateful});
    }
    return list;
}

void IncusProvider::snapshot_restore(const std::string& given, const std::string& snapshot) {
    const auto name = instance_of(given);
    check_snapshot_name(snapshot);
    const auto instance = require_instance(name);
    const auto current = read_sandbox_record(instance);
    // The snapshot brings its own mounts back: check them before anything is
    // restored, as start checks the current ones.
    std::optional<InstanceSnapshot> taken;
    for (const auto& snap : m_api.snapshots(name)) {
        if (snap.name == snapshot || snap.name.ends_with("/" + snapshot)) taken = snap;
    }
    if (!taken && !m_api.preview()) {
        throw Error(fmt::format("{} has no snapshot named {}", name, snapshot),
                    "`agentctl snapshot list " + name + "` shows them");
    }
    if (taken) {
        const auto recorded = read_sandbox_record(snapshot_as_instance(instance, *taken));
        if (instance.running() && !recorded.mounts.empty()) {
            // Incus would restart it with those mounts at once, past start's
            // checks of the directories it actually mounts.
            throw Error(fmt::format("{} is running and snapshot {} has host mounts", name, snapshot),
                        "stop it first (agentctl stop " + name + "); the next start checks the mounts again");
        }
        recheck_recorded_mounts(name, recorded);
    }
    m_context.reporter.step(fmt::format("restoring {} to snapshot {}", name, snapshot));
    {
        // A running container is started again by Incus: with a pass (start_gate.hpp).
        const auto pass = instance.running() ? open_start_gate(name, instance, current.isolation) : nullptr;
        m_api.restore_snapshot(name, snapshot);
    }
    // The ACL on the bridge is not part of the snapshot and stays in force; keep
    // the records that describe it current, not as they were at snapshot time.
    // The widenings are those of the current network policy with the restored
    // mounts and ports.
    const auto restored = m_api.preview() ? instance : require_instance(name);
    const auto view = widening_view(read_sandbox_record(restored), current.network);
    std::map<std::string, std::string> keep;
    for (auto k : {key::k_network, key::k_acl}) keep[std::string(k)] = instance.config_value(k);
    keep[std::string(key::k_widenings)] = widenings_record(view);
    keep[std::string(key::k_confinement)] = "";
    // A snapshot taken before the gate existed brings raw.lxc back without it.
    if (gated(view.isolation)) {
        const auto raw = restored.config_value("raw.lxc");
        if (const auto with_gate = with_start_gate(raw, start_pass(name)); with_gate != raw)
            keep["raw.lxc"] = with_gate;
    }
    set_records(name, keep);
    for (const auto& widening : widenings(view)) m_context.reporter.warning(fmt::format("{}: {}", name, widening));
}

void IncusProvider::snapshot_delete(const std::string& given, const std::string& snapshot) {
    const auto name = instance_of(given);
    check_snapshot_name(snapshot);
    require_instance(name);
    m_context.reporter.step(fmt::format("deleting snapshot {} of {}", snapshot, name));
    m_api.delete_snapshot(name, snapshot);
}

// No base image: agentctl's Debian image, bootstrapped on this host.
void IncusProvider::build_from_nothing(const std::string& output, const std::vector<std::string>& packages) {
    m_api.require_extensions();
    if (!m_api.preview() && m_api.image_alias(output)) {
        throw Error(fmt::format("an image with the alias \"{}\" already exists", output),
                    fmt::format("pick another name, or remove it first: incus image delete {}", output));
    }
    BootstrapOptions options;
    options.alias = output;
    options.remote = m_server.remote;
    options.project = m_project;
    options.packages = packages;
    if (const char* mirror = std::getenv("AGENTCTL_DEBIAN_MIRROR"); mirror && *mirror) options.mirror = mirror;
    options.cache_dir = image_cache_dir();
    options.creation_date = static_cast<long long>(std::time(nullptr));
    build_bootstrap_image(m_context, options);
    if (m_api.preview()) return;
    bind_image_accounts(output);
    m_context.reporter.notice(fmt::format("image {} is ready", output));
}

void IncusProvider::bind_image_accounts(const std::string& alias) {
    const auto image = m_api.image(alias);
    if (!image) {
        throw Error(fmt::format("the image {} that was just made is not in Incus", alias),
                    "see `incus image list`, then run agentctl image build again");
    }
    // Unbound, the image's record of its accounts would not be trusted: a
    // build that cannot bind it fails and takes the image back, so that the
    // next build starts afresh instead of stopping at the alias.
    const auto fingerprint = image->value("fingerprint", "");
    try {
        m_context.reporter.step(fmt::format("recording the accounts of image {}", alias));
        m_api.patch_image(fingerprint, accounts_binding(*image));
    } catch (const Error& error) {
        try {
            m_api.delete_image(fingerprint);
        } catch (const Error& cleanup) {
            throw Error(fmt::format("recording the accounts on image {} failed: {}; removing the image failed too: {}",
                                    alias, error.what(), cleanup.what()),
                        fmt::format("remove it (incus image delete {}), then run agentctl image build again", alias));
        }
        throw Error(fmt::format("recording the accounts on image {} failed, and the image was removed: {}", alias,
                                error.what()),
                    "run agentctl image build again");
    }
}

void IncusProvider::image_pull(const std::string& ref) {
    const auto remote = image_server_url(setting(m_context, config_key::k_image_remote));
    m_context.reporter.step(fmt::format("pulling image {} from {}", ref, remote));
    m_api.create_image(image_pull_payload(remote, ref), k_install_timeout);
}

void IncusProvider::image_build(const std::string& output, const std::string& base,
                                const std::vector<std::string>& packages) {
    if (base.empty()) {
        build_from_nothing(output, packages);
        return;
    }
    SandboxSpec spec;
    spec.name = fmt::format("agentctl-build-{}", ::getpid());
    spec.image = base;
    spec.packages = packages;
    spec.isolation = m_api.supports_vms() ? Isolation::Vm : Isolation::Container;
    if (spec.isolation == Isolation::Container) {
        m_context.reporter.notice("this host cannot run virtual machines: building a container image");
    }
    for (const auto& entry : package_source_entries()) {
        spec.network.allow.push_back(policy::parse_allow_entry(entry, "image build package sources"));
    }
    m_context.reporter.step(fmt::format("building image {} from {}", output, base));
    create(spec);
    try {
        // Its accounts as they are now, the sandbox user included (image_bootstrap.hpp).
        const ImageAccounts accounts{m_api.pull_file(spec.name, "/etc/passwd"),
                                     m_api.pull_file(spec.name, "/etc/group")};
        m_context.reporter.step(fmt::format("stopping {}", spec.name));
        m_api.change_state(spec.name, state_payload("stop", false, 60), 180);
        m_context.reporter.step(fmt::format("publishing {} as image {}", spec.name, output));
        m_api.create_image(image_publish_payload(spec.name, output, accounts_properties(accounts)), k_install_timeout);
        if (!m_api.preview()) bind_image_accounts(output);
    } catch (...) {
        remove_pieces(spec.name);
        throw;
    }
    remove_pieces(spec.name);
}

}  // namespace agentctl::provider::incus
