// start, stop, list, status, and what happens after every boot: readiness,
// the confinement check, packages, the agent, and the mount report.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/guest/guest_scripts.hpp"
#include "provider/incus/network/host_ports.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/common/agent_install.hpp"
#include "provider/common/command_output.hpp"
#include "provider/common/mount_report.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"
#include "provider/incus/guest/provisioning.hpp"

namespace agentctl::provider::incus {
namespace {

// The one address agentctl gives a sandbox's eth0 (ipv4.address), when Incus
// lets the NIC send from no other (security.ipv4_filtering; acl_rules.hpp,
// confine_instance); empty otherwise.
std::string fixed_address(const Instance& instance) {
    const auto nic = instance.expanded_devices.find("eth0");
    if (nic == instance.expanded_devices.end()) return {};
    const auto value = [&](std::string_view key) {
        const auto it = nic->second.find(key);
        return it == nic->second.end() ? std::string() : it->second;
    };
    if (value("security.ipv4_filtering") != "true") return {};
    return value("ipv4.address");
}

// Whether instance_ips needs the instance's state: it runs, and has no fixed
// address (a sandbox made by an earlier agentctl).
bool addresses_need_state(const Instance& instance) { return instance.running() && fixed_address(instance).empty(); }

// The addresses a sandbox has: from its state when the instance came with it
// (every global address of every interface but lo, as the sandbox sees them);
// else, while it runs, its fixed address, the only one it can send from.
std::vector<std::string> instance_ips(const Instance& instance) {
    std::vector<std::string> ips;
    if (!instance.state) {
        if (auto fixed = fixed_address(instance); !fixed.empty() && instance.running()) ips.push_back(fixed);
        return ips;
    }
    for (const auto& [iface, info] : instance.state->network) {
        if (iface == "lo") continue;
        for (const auto& address : info.addresses) {
            if (address.scope == "global") ips.push_back(address.address);
        }
    }
    return ips;
}

}  // namespace

void IncusProvider::wait_until_ready(const std::string& name, bool vm) {
    if (m_api.preview()) return;
    const int timeout = vm ? k_boot_timeout_vm : k_boot_timeout_container;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    if (vm) m_context.reporter.step(fmt::format("waiting for the Incus agent in {}", name));
    for (;;) {
        try {
            if (run_as_root(name, "true", 30).exit_code == 0) return;
        } catch (const Error&) {
            // The VM agent is not up yet.
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            throw Error(
                fmt::format("{} did not become ready within {} s", name, timeout),
                vm ? "the image must contain the Incus VM agent (incus-agent); check `incus console " + name + "`"
                   : "check `incus info " + name + " --show-log`");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(vm ? 1000 : 100));
    }
}

std::string IncusProvider::eth0_address(const InstanceState& state) {
    if (const auto eth0 = state.network.find("eth0"); eth0 != state.network.end()) {
        for (const auto& address : eth0->second.addresses) {
            if (address.family == "inet") return address.address;
        }
    }
    return {};
}

InstanceState IncusProvider::wait_for_address_state(const std::string& name, int timeout_seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
    for (;;) {
        auto state = m_api.instance_state(name);
        if (!eth0_address(state).empty() || m_api.preview() || std::chrono::steady_clock::now() >= deadline) {
            return state;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

std::string IncusProvider::wait_for_address(const std::string& name, int timeout_seconds) {
    return eth0_address(wait_for_address_state(name, timeout_seconds));
}

void IncusProvider::install_packages(const std::string& name, const std::vector<std::string>& packages) {
    if (packages.empty()) return;
    auto manager = run_as_root(name, detect_package_manager_script(), 30).out;
    while (!manager.empty() && (manager.back() == '\n' || manager.back() == ' ')) manager.pop_back();
    if (m_api.preview()) manager = "apt";
    if (manager != "apt" && manager != "dnf" && manager != "apk") {
        throw Error(fmt::format("cannot install packages in {}: no apt-get, dnf or apk found", name),
                    "use an image with one of those package managers");
    }
    auto names = guest_package_names(packages, manager);
    m_context.reporter.step(fmt::format("installing packages with {}: {}", manager, fmt::join(names, " ")));
    auto argv = package_install_argv(manager, names);
    auto result = m_api.exec(name, exec_payload(argv, {}, nullptr), k_install_timeout);
    if (result.exit_code != 0) {
        throw Error(fmt::format("installing packages in {} failed (exit {}): {}", name, result.exit_code,
                                common::output_tail(result.err)),
                    "the package sources must be allowed, e.g. --allow-preset apt");
    }
}

void IncusProvider::install_agent(const std::string& name, const SandboxRecord& record, bool fresh) {
    const auto& agent_name = record.agent;
    if (agent_name.empty() || record.agent_installed) return;
    const auto& agent = policy::find_agent(agent_name);
    const auto& user = record.guest;
    if (!user) throw Error(fmt::format("{} has no sandbox user recorded; recreate it", name));
    const auto retry = fresh ? std::string("nothing of the sandbox was kept (--keep-on-failure keeps it)")
                             : fmt::format("`agentctl start {}` retries the install", name);
    const auto as_user = [&](std::vector<std::string> argv, int timeout) {
        return m_api.exec(name, exec_payload(std::move(argv), {}, &*user), timeout);
    };
    // Left recorded as not installed whatever fails: the next start retries.
    auto tools = as_user({"/bin/sh", "-c", common::agent_tools_script(agent)}, 30);
    if (tools.exit_code != 0 && !m_api.preview()) {
        const auto missing = common::parse_missing_tools(tools.out);
        if (missing.empty()) {
            throw common::agent_install_failed(agent_name, name, common::k_step_tools, tools.exit_code,
                                               tools.err + tools.out, retry);
        }
        throw common::agent_tools_missing(agent_name, fmt::format("sandbox {}", name), missing);
    }
    m_context.reporter.step(fmt::format("installing agent {} as {}", agent_name, user->name));
    auto result = as_user(common::agent_install_argv(agent), k_install_timeout);
    if (result.exit_code != 0) {
        throw common::agent_install_failed(agent_name, name, common::k_step_installer, result.exit_code,
                                           result.out + result.err, retry);
    }
    m_context.reporter.step(fmt::format("checking that {} runs as {}", agent.binary, user->name));
    auto check = as_user({"/bin/sh", "-c", common::agent_check_script(agent)}, 60);
    if (check.exit_code != 0) {
        throw common::agent_install_failed(agent_name, name, common::agent_check_step(agent, check.exit_code),
                                           check.exit_code, check.out + check.err, retry);
    }
    set_records(name, {{std::string(key::k_agent_installed), "true"}});
}

void IncusProvider::after_boot(const std::string& name, bool fresh, std::future<ProbeRun> probes) {
    const auto record = read_sandbox_record(require_instance(name));
    const bool vm = record.isolation == Isolation::Vm;
    if (!probes.valid()) wait_until_ready(name, vm);
    if (!fresh && !record.guest && !m_api.preview()) {
        throw Error(fmt::format("{} has no sandbox user recorded (its create did not finish)", name),
                    "delete and recreate it: agentctl delete " + name);
    }
    verify_confinement(name, record, std::move(probes));
    if (fresh) install_packages(name, record.packages);
    install_agent(name, record, fresh);
    common::report_mounts(m_context.reporter, record.mounts);
}

namespace {

// The config keys that keep root inside away from the host; a sandbox created
// by an older agentctl (shifted mounts, shared uid range) lacks them.
bool needs_containment_update(const Instance& instance, Isolation isolation) {
    if (instance.config_value("security.guestapi") != "false") return true;
    if (isolation == Isolation::Container && instance.config_value("security.idmap.isolated") != "true") return true;
    for (const auto& [device, value] : instance.devices) {
        if (is_mount_device(device) && value.contains("shift")) return true;
    }
    return false;
}

std::vector<std::pair<dev_t, ino_t>> identities(const std::vector<Mount>& mounts) {
    std::vector<std::pair<dev_t, ino_t>> out;
    for (const auto& mount : mounts) {
        struct stat st {};
        if (::lstat(mount.host_path.c_str(), &st) != 0) {
            throw Error(fmt::format("mount {}: {}", mount.host_path, std::strerror(errno)),
                        "nothing was started; restore the directory or change the mounts");
        }
        out.emplace_back(st.st_dev, st.st_ino);
    }
    return out;
}

}  // namespace

void IncusProvider::replace_mounts(const std::string& name, Instance instance, const std::vector<Mount>& mounts) {
    const auto record = read_sandbox_record(instance);
    const auto isolation = record.isolation;
    std::erase_if(instance.devices, [](const auto& device) { return is_mount_device(device.first); });
    const auto added = mount_devices(mounts, isolation);
    for (const auto& [device, value] : added.items()) instance.devices[device] = value.get<ConfigMap>();
    auto& config = instance.config;
    config[std::string(key::k_mounts)] = mounts_record(mounts);
    // The same identity map create gives: the owner of the writable mounts is
    // the sandbox user, nobody else is mapped.
    const auto& user = record.guest;
    const int guest_uid = user ? user->uid : k_default_guest_uid;
    auto idmap = plan_identity_map(writable_mount_owners(mounts), guest_uid);
    if (idmap) {
        if (user) idmap->guest_gid = user->gid;
        if (!m_api.preview()) check_subordinate_ids(*idmap);
        config["raw.idmap"] = raw_idmap_value(*idmap);
    } else {
        config.erase("raw.idmap");
    }
    config["security.guestapi"] = "false";
    if (isolation == Isolation::Container) {
        config["security.idmap.isolated"] = "true";
        if (!config.contains("limits.processes")) config["limits.processes"] = std::to_string(k_default_processes);
    }
    auto view = widening_view(record);
    view.mounts = mounts;
    config[std::string(key::k_widenings)] = widenings_record(view);
    // PUT drops the volatile state Incus wants to keep only when asked; keep config as read.
    m_api.put_instance(name, instance, 120);
}

void IncusProvider::recheck_recorded_mounts(const std::string& name, const SandboxRecord& record) {
    common::recheck_recorded_mounts(m_context, name, record.profiles, record.mounts);
}

void IncusProvider::verify_started_mounts(const std::string& name, const std::vector<Mount>& mounts,
                                          const std::vector<std::pair<dev_t, ino_t>>& checked) {
    if (m_api.preview() || mounts.empty()) return;
    const auto pid = m_api.instance_state(name).pid;
    std::vector<std::string> problems;
    for (std::size_t i = 0; i < mounts.size() && i < checked.size(); ++i) {
        struct stat st {};
        const auto inside = fmt::format("/proc/{}/root{}", pid, mounts[i].guest_path);
        if (pid <= 0 || ::stat(inside.c_str(), &st) != 0) {
            problems.push_back(fmt::format("{} -> {}: cannot look at the mounted directory ({})", mounts[i].host_path,
                                           mounts[i].guest_path, pid <= 0 ? "no init process" : std::strerror(errno)));
        } else if (st.st_dev != checked[i].first || st.st_ino != checked[i].second) {
            problems.push_back(
                fmt::format("{} -> {}: the directory mounted is not the one that was checked (it was "
                            "replaced while the sandbox started)",
                            mounts[i].host_path, mounts[i].guest_path));
        }
    }
    if (problems.empty()) return;
    m_context.reporter.step(fmt::format("stopping {}: a mount is not what was checked", name));
    m_api.change_state(name, state_payload("stop", true, -1), 120);
    std::string message = fmt::format("{} was stopped right after it started:", name);
    for (const auto& problem : problems) message += "\n  " + problem;
    throw Error(message, "check the directories on the host, then start it again");
}

bool IncusProvider::gated(Isolation isolation) const {
    return isolation == Isolation::Container && server_is_this_machine() && !m_api.preview();
}

std::string IncusProvider::start_pass(const std::string& name) const {
    return start_pass_path(m_context.runtime_dir, m_project, name);
}

std::unique_ptr<StartPass> IncusProvider::open_start_gate(const std::string& name, const Instance& instance,
                                                          Isolation isolation) {
    if (!gated(isolation)) return {};
    const auto pass = start_pass(name);
    const auto raw = instance.config_value("raw.lxc");
    if (const auto gated_raw = with_start_gate(raw, pass); gated_raw != raw) {
        m_api.patch_instance_config(name, Json{{"raw.lxc", gated_raw}});
    }
    return std::make_unique<StartPass>(pass);
}

void IncusProvider::start(const std::string& given, const StartRequest& request) {
    const auto name = instance_of(given);
    auto instance = require_instance(name);
    auto record = read_sandbox_record(instance);
    const auto isolation = record.isolation;
    const auto reread = [&] {
        instance = require_instance(name);
        record = read_sandbox_record(instance);
    };
    if (request.mounts) {
        refuse_mounts_elsewhere(*request.mounts);
        if (record.mounts != *request.mounts) {
            m_context.reporter.step(fmt::format("updating the mounts of {}", name));
            replace_mounts(name, instance, *request.mounts);
            reread();
        }
    }
    // The host side first (firewall table, policy, proxy): after a host reboot
    // none of it exists, and a crashed proxy is started again. A running
    // sandbox whose proxy or resolver cannot be put in place (another process
    // holds its address) does not keep running beside it.
    try {
        restore_egress(name, record);
    } catch (const Error&) {
        if (instance.running() && !m_api.preview()) {
            m_context.reporter.step(
                fmt::format("stopping {}: its egress proxy or resolver could not be put in place", name));
            m_api.change_state(name, state_payload("stop", true, -1), 120);
        }
        throw;
    }
    if (!instance.running() || m_api.preview()) {
        const auto mounts = record.mounts;
        // Every recorded mount is checked again from its canonical path: a
        // directory swapped for a symlink since the last check is refused here.
        // (Mounts this start was given were resolved just now by the same rules;
        // under --preview their missing directories exist only on paper.)
        if (!(request.mounts && m_api.preview())) recheck_recorded_mounts(name, record);
        if (needs_containment_update(instance, isolation) && !m_api.preview()) {
            m_context.reporter.step(fmt::format("updating {} to agentctl's containment settings", name));
            replace_mounts(name, instance, mounts);
            reread();
        }
        const auto& ports = record.ports;
        // Held until the instance has started (host_ports.hpp).
        const auto reserved = server_is_this_machine() && !m_api.preview()
                                  ? reserve_host_ports(m_context.host_lock_dir, ports, port_wait_notice())
                                  : std::vector<std::unique_ptr<core::FileLock>>{};
        for (const auto& p : ports) check_host_port_free(p);
        const auto checked = m_api.preview() ? std::vector<std::pair<dev_t, ino_t>>{} : identities(mounts);
        const auto pass = open_start_gate(name, instance, isolation);
        m_context.reporter.step(fmt::format("starting {}", name));
        m_api.change_state(name, state_payload("start", false, -1), k_create_timeout);
        if (isolation == Isolation::Container) verify_started_mounts(name, mounts, checked);
    }
    after_boot(name, false);
}

void IncusProvider::stop(const std::string& given, const StopRequest& request) {
    const auto name = instance_of(given);
    auto instance = require_instance(name);
    const auto record = read_sandbox_record(instance);
    auto& host = egress(record.placement);
    const auto site = site_of(name, record);
    if (!instance.running() && !m_api.preview()) {
        m_context.reporter.step(fmt::format("{} is already stopped", name));
        stop_egress_services(site, host);
        return;
    }
    m_context.reporter.step(fmt::format("stopping {}", name));
    const int timeout = request.timeout_seconds.value_or(request.force ? -1 : 30);
    m_api.change_state(name, state_payload("stop", request.force, timeout), (timeout > 0 ? timeout : 30) + 60);
    stop_egress_services(site, host);
}

InstanceInfo IncusProvider::to_info(const Instance& instance, const SandboxRecord& record) const {
    InstanceInfo info;
    info.name = record.sandbox_name();
    info.provider = "incus";
    info.status = instance.status;
    // A standalone server reports "none" (or nothing): there is no member to name.
    if (instance.location != "none") info.location = instance.location;
    info.image = record.image;
    info.profiles = record.profiles;
    info.created_at = instance.created_at;
    info.ips = instance_ips(instance);
    info.mounts = record.mounts;
    info.ports = record.ports;
    info.isolation = isolation_record(record.isolation);
    info.user = record.user;
    if (record.network) {
        info.network = record.network;
        info.dns_allowlisted_only = true;  // the bridge's resolver (provider_network.cpp)
    }
    info.confinement = record.confinement;
    read_evidence(instance, record, info);
    info.widenings = record.widenings;
    add_egress_lines(record, info);
    const std::pair<std::string_view, std::string> shown[] = {
        {key::k_bridge, record.bridge},
        {key::k_acl, record.acl},
        {key::k_subnet, record.subnet ? record.subnet->to_string() : ""},
        {key::k_uid, record.guest ? std::to_string(record.guest->uid) : ""},
        {key::k_agent, record.agent},
        {key::k_agent_installed, record.agent.empty()     ? ""
                                 : record.agent_installed ? "true"
                                                          : "false"}};
    for (const auto& [k, value] : shown) {
        if (!value.empty())
            info.extra.emplace_back(std::string(k.substr(std::string_view("user.agentctl.").size())), value);
    }
    if (info.isolation == "container") {
        const auto processes = instance.config_value("limits.processes");
        info.extra.emplace_back("processes", processes.empty() ? std::string("unlimited") : processes);
    }
    if (auto base = instance.config_value("volatile.idmap.base"); !base.empty()) {
        info.extra.emplace_back("idmap.base", base);
    }
    if (!m_server.remote.empty()) info.extra.emplace_back("remote", m_server.remote);
    if (!m_server.project.empty()) info.extra.emplace_back("project", m_server.project);
    if (!m_server.remote.empty() || !m_server.project.empty()) info.extra.emplace_back("server", m_server.describe());
    return info;
}

std::vector<InstanceInfo> IncusProvider::list() {
    std::vector<InstanceInfo> infos;
    // One request, whatever the number of sandboxes, and without their state:
    // Incus gathers that from inside each running instance (a few ms each), and
    // what list shows of it, the addresses, a sandbox agentctl made has fixed
    // (fixed_address). Only when a running sandbox has no fixed address (one
    // made by an earlier agentctl) is every state fetched, in one more request.
    auto instances = m_api.instances(false);
    // Companion instances (egress proxies) are agentctl's too, but not sandboxes.
    auto is_sandbox = [](const Instance& instance) { return read_instance_marks(instance).is_sandbox(); };
    if (std::any_of(instances.begin(), instances.end(),
                    [&](const Instance& instance) { return is_sandbox(instance) && addresses_need_state(instance); })) {
        instances = m_api.instances(true);
    }
    // Incus lists a project that does not exist as empty: say so instead.
    if (instances.empty() && !m_project.empty() && !m_api.project(m_project)) {
        throw Error(fmt::format("the Incus project {} does not exist on the {}", m_project, m_server.describe()),
                    fmt::format("create it (incus project create {}) or choose another with --project, incus.project "
                                "or INCUS_PROJECT",
                                m_project));
    }
    for (const auto& instance : instances) {
        if (!is_sandbox(instance)) continue;
        try {
            infos.push_back(to_info(instance, read_sandbox_record(instance)));
        } catch (const Error& e) {
            // One damaged record does not hide the others: the sandbox is listed
            // with what Incus says of it, and the warning says what is wrong.
            InstanceInfo info;
            info.name = read_instance_marks(instance).sandbox_name();
            info.provider = "incus";
            info.status = instance.status;
            info.confinement = {ConfinementState::NotVerified, "its record cannot be read"};
            m_context.reporter.warning(fmt::format("{}: {} ({})", info.name, e.what(), e.hint()));
            infos.push_back(std::move(info));
        }
    }
    return infos;
}

InstanceInfo IncusProvider::status(const std::string& given) {
    // The bridge's GET and the nft table's digest need only the name: they run
    // while the instance's GET does (provider_evidence.cpp).
    auto early = start_status_queries(given);
    auto found = find_sandbox(given);
    const auto& name = found.name;
    // From the pool: what it has goes by its instance's name.
    if (name != given) early = start_status_queries(name);
    auto instance = checked(name, std::move(found.instance));
    if (addresses_need_state(instance) && !m_api.preview()) {
        instance.state = m_api.instance_state(name);
    }
    const auto record = read_sandbox_record(instance);
    auto info = to_info(instance, record);
    judge_confinement(name, instance, record, info, early);
    return info;
}

}  // namespace agentctl::provider::incus
