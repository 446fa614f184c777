// gc: what agentctl made whose sandbox is gone (an interrupted create or
// delete, an instance deleted behind agentctl's back), found and removed.
//
// A sandbox is gone when no instance of its name exists in any project, or
// when its instance is one a killed create left (create.pending). Its pieces
// are then the bridge and the ACL that name it (in this project), and on
// this machine its firewall table, its host processes (only the ones
// agentctl recorded starting), its state directory and its cgroup. Each such
// sandbox is handled while gc holds its lock (host_sandbox_lock_path); one
// whose lock another agentctl holds (a create or delete under way) is left
// alone. A firewall table, cgroup or kernel bridge interface of a bridge
// Incus does not have, whose sandbox is not known, goes under the host's
// network lock, after checking again that Incus does not have that bridge.
#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "provider/common/process_identity.hpp"
#include "provider/incus/network/host_cgroup.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"

namespace agentctl::provider::incus {

namespace fs = std::filesystem;

// What exists now.
struct IncusProvider::Scan {
    std::set<std::string> everywhere;               // every instance name, of every project
    std::set<std::string> unfinished;               // this project's instances a killed create left
    std::map<std::string, std::string> companions;  // this project's proxy instances, by sandbox
    std::set<std::string> bridges;                  // every network's name, in every project
    std::set<std::string> managed;                  // of those, the ones Incus manages
    std::vector<std::string> tables;                // bridges with an agentctl firewall table here
    std::vector<std::string> cgroups;               // bridges with an agentctl cgroup here
    std::vector<std::string> interfaces;            // bridge interfaces named like agentctl's here
};

namespace {

Leftover leftover(std::string kind, std::string name, std::string sandbox) {
    Leftover piece;
    piece.kind = std::move(kind);
    piece.name = std::move(name);
    piece.sandbox = std::move(sandbox);
    return piece;
}

bool is_bridge(const std::string& name) { return name.starts_with(k_bridge_prefix); }

constexpr const char* k_interface_kind = "bridge interface";

// The kernel's bridge interfaces named like agentctl's bridges. Incus makes
// the interface after it has recorded the network and removes it before it
// forgets the network, so one Incus does not list is left over (a delete that
// failed half-way through Incus's teardown).
std::vector<std::string> bridge_interfaces() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/sys/class/net", ec)) {
        auto name = entry.path().filename().string();
        if (is_bridge(name) && fs::is_directory(entry.path() / "bridge", ec)) names.push_back(std::move(name));
    }
    return names;
}

// The names of `networks` (an Incus listing), only the managed ones when `managed`.
std::set<std::string> network_names(const Json& networks, bool managed) {
    std::set<std::string> names;
    for (const auto& network : networks) {
        if (!managed || network.value("managed", false)) names.insert(network.value("name", std::string()));
    }
    return names;
}

bool valid_name(const std::string& name) {
    try {
        check_sandbox_name(name);
        return true;
    } catch (const Error&) {
        return false;
    }
}

}  // namespace

std::vector<Leftover> IncusProvider::find_leftovers(std::map<std::string, std::unique_ptr<core::FileLock>>& held) {
    // What gc leaves alone is known only from what the daemon says exists.
    if (!m_api.server().is_object()) {
        throw Error(fmt::format("agentctl gc cannot read the {}", m_server.describe()),
                    "gc tells leftovers from live sandboxes by asking the daemon: run it where the daemon answers");
    }
    const bool here = server_is_this_machine();
    Scan scan;
    // The host's pieces are read before the bridges: a table or cgroup is made
    // only once its bridge exists, so one whose bridge is missing from the
    // later list is not a create's under way.
    if (here) {
        ProcessRequest request;
        request.argv = {"nft", "-j", "list", "tables"};
        request.timeout = std::chrono::seconds(20);
        const auto result = m_context.runner.run(request);
        if (result.exit_code != 0) {
            throw Error(fmt::format("nft -j list tables failed: {}", result.err),
                        "agentctl gc must run as root, on a host with nftables");
        }
        for (auto& bridge : firewall_bridges(result.out)) {
            if (is_bridge(bridge)) scan.tables.push_back(std::move(bridge));
        }
        for (auto& name : cgroup_names()) {
            if (is_bridge(name)) scan.cgroups.push_back(std::move(name));
        }
        scan.interfaces = bridge_interfaces();
    }
    std::set<std::string> elsewhere_or_user;  // names no piece of which gc may touch
    for (const auto& instance : m_api.instances_in_every_project()) {
        const auto& name = instance.name;
        scan.everywhere.insert(name);
        const bool this_project = (instance.project.empty() ? std::string("default") : instance.project) ==
                                  (m_project.empty() ? std::string("default") : m_project);
        // Another project's instance is never read: its marks are not ours to judge.
        const auto marks = this_project ? read_instance_marks(instance) : InstanceMarks{};
        if (marks.is_companion()) {
            scan.companions[marks.sandbox] = name;
        } else if (marks.unfinished()) {
            scan.unfinished.insert(name);
        } else {
            elsewhere_or_user.insert(name);
        }
    }
    const auto networks = m_api.networks_in_every_project();
    scan.bridges = network_names(networks, false);
    scan.managed = network_names(networks, true);

    // The sandboxes that are gone, with what names them in Incus.
    std::map<std::string, std::vector<Leftover>> gone;
    const auto gone_sandbox = [&](const std::string& sandbox) {
        return valid_name(sandbox) && !elsewhere_or_user.contains(sandbox);
    };
    for (const auto& name : scan.unfinished) gone[name].push_back(leftover("instance", name, name));
    for (const auto& [sandbox, companion] : scan.companions) {
        if (!scan.everywhere.contains(sandbox) || scan.unfinished.contains(sandbox)) {
            gone[sandbox].push_back(leftover("egress proxy instance", companion, sandbox));
        }
    }
    std::map<std::string, Json> bridge_of;  // the gone sandboxes' bridges
    for (const auto& network : networks) {
        const auto sandbox = owner_of(network);
        const auto name = network.value("name", std::string());
        if (sandbox.empty() || project_of(network) != m_project || name != bridge_name(sandbox)) continue;
        if (!gone_sandbox(sandbox)) continue;
        gone[sandbox].push_back(leftover("bridge", name, sandbox));
        bridge_of[sandbox] = network;
    }
    for (const auto& acl : m_api.acls()) {
        const auto sandbox = owner_of(acl);
        const auto name = acl.value("name", std::string());
        if (sandbox.empty() || project_of(acl) != m_project || name != acl_name(sandbox)) continue;
        if (gone_sandbox(sandbox)) gone[sandbox].push_back(leftover("network ACL", name, sandbox));
    }
    // This agentctl's state directories of sandboxes that have neither an
    // instance nor a bridge (a sandbox of another project has its bridge).
    std::error_code ec;
    if (here && !m_context.state_dir.empty()) {
        for (const auto& entry : fs::directory_iterator(fs::path(m_context.state_dir) / "incus", ec)) {
            const auto sandbox = entry.path().filename().string();
            if (!entry.is_directory(ec) || !gone_sandbox(sandbox)) continue;
            if (scan.everywhere.contains(sandbox) && !scan.unfinished.contains(sandbox)) continue;
            if (scan.bridges.contains(bridge_name(sandbox)) && !bridge_of.contains(sandbox)) continue;
            gone[sandbox];
        }
    }

    std::vector<Leftover> found;
    std::set<std::string> claimed;  // bridges whose host pieces a gone sandbox accounts for
    for (auto& [sandbox, pieces] : gone) {
        if (auto it = held.find(sandbox); it == held.end()) {
            auto lock =
                core::FileLock::try_acquire(host_sandbox_lock_path(m_context.host_lock_dir, sandbox), !m_api.preview());
            if (!lock) {
                m_context.reporter.notice(
                    fmt::format("left {} alone: another agentctl is creating or deleting it now", sandbox));
            }
            it = held.emplace(sandbox, std::move(lock)).first;
            if (!it->second) continue;
        } else if (!it->second) {
            continue;  // said already
        }
        const auto bridge = bridge_name(sandbox);
        claimed.insert(bridge);
        if (!here) {
            found.insert(found.end(), pieces.begin(), pieces.end());
            continue;
        }
        HostRecord host;
        try {
            if (auto it = bridge_of.find(sandbox); it != bridge_of.end()) {
                host = parse_host_record(it->second.value("config", Json::object()));
            }
        } catch (const Error& e) {
            m_context.reporter.warning(fmt::format("{}: {}", sandbox, e.what()));
        }
        const auto dir = state_dir_of(m_context, host, sandbox);
        if (std::find(scan.tables.begin(), scan.tables.end(), bridge) != scan.tables.end()) {
            pieces.push_back(leftover("nft table", "inet " + firewall_table(bridge), sandbox));
        }
        if (const int pid = common::verified_pid(proxy_record_path(dir)); pid > 0) {
            pieces.push_back(leftover("egress proxy", fmt::format("pid {}", pid), sandbox));
        }
        if (const int pid = common::verified_pid(resolver_record_path(dir)); pid > 0) {
            pieces.push_back(leftover("resolver", fmt::format("pid {}", pid), sandbox));
        }
        if (fs::is_directory(dir, ec)) pieces.push_back(leftover("state directory", dir, sandbox));
        if (std::find(scan.cgroups.begin(), scan.cgroups.end(), bridge) != scan.cgroups.end()) {
            pieces.push_back(leftover("cgroup", "agentctl/" + bridge, sandbox));
        }
        found.insert(found.end(), pieces.begin(), pieces.end());
    }
    for (const auto& bridge : scan.tables) {
        if (!scan.bridges.contains(bridge) && !claimed.contains(bridge)) {
            found.push_back(leftover("nft table", "inet " + firewall_table(bridge), ""));
        }
    }
    for (const auto& bridge : scan.cgroups) {
        if (!scan.bridges.contains(bridge) && !claimed.contains(bridge)) {
            found.push_back(leftover("cgroup", "agentctl/" + bridge, ""));
        }
    }
    for (const auto& bridge : scan.interfaces) {
        if (!scan.managed.contains(bridge) && !claimed.contains(bridge)) {
            found.push_back(leftover(k_interface_kind, bridge, ""));
        }
    }
    return found;
}

void IncusProvider::remove_leftovers_of(const std::string& name) {
    retry_transient(
        [&] {
            // A killed create's operations may still run in the daemon.
            (void)m_api.wait_for_instance_operations(name, 120);
            // Checked again now that gc holds the name: an instance of that
            // name that is not an unfinished sandbox is never deleted.
            if (auto instance = m_api.instance(name)) {
                if (!read_instance_marks(*instance).unfinished()) {
                    throw Error(fmt::format("an instance named {} exists now; left alone", name));
                }
            }
            (void)remove_pieces(name);
        },
        std::chrono::seconds(180));
}

void IncusProvider::remove_stray_host_pieces(const std::vector<Leftover>& found) {
    const auto lock = lock_network();
    const auto networks = m_api.networks_in_every_project();
    const auto bridges = network_names(networks, false);
    const auto managed = network_names(networks, true);
    for (const auto& piece : found) {
        if (!piece.sandbox.empty()) continue;
        if (piece.kind == "nft table") {
            const auto bridge = piece.name.substr(piece.name.find(firewall_table("")) + firewall_table("").size());
            if (!bridges.contains(bridge)) m_egress->remove_firewall(bridge);
        } else if (piece.kind == "cgroup") {
            const auto bridge = piece.name.substr(piece.name.find('/') + 1);
            if (!bridges.contains(bridge)) remove_cgroup(bridge);
        } else if (piece.kind == k_interface_kind && !managed.contains(piece.name)) {
            ProcessRequest request;
            request.argv = {"ip", "link", "delete", piece.name, "type", "bridge"};
            request.timeout = std::chrono::seconds(20);
            if (const auto result = m_context.runner.run(request); result.exit_code != 0) {
                throw Error(fmt::format("ip link delete {} failed: {}", piece.name, result.err));
            }
        }
    }
}

std::vector<Leftover> IncusProvider::collect() {
    std::map<std::string, std::unique_ptr<core::FileLock>> held;
    auto found = find_leftovers(held);
    if (m_api.preview()) return found;
    std::set<std::string> sandboxes;
    for (const auto& piece : found) {
        if (!piece.sandbox.empty()) sandboxes.insert(piece.sandbox);
    }
    std::map<std::string, std::string> problems;  // by sandbox ("" = the stray host pieces)
    for (const auto& sandbox : sandboxes) {
        try {
            remove_leftovers_of(sandbox);
        } catch (const std::exception& e) {
            m_context.reporter.fail_step();
            problems[sandbox] = e.what();
        }
    }
    try {
        if (server_is_this_machine()) remove_stray_host_pieces(found);
    } catch (const std::exception& e) {
        problems[""] = e.what();
    }
    // What is still there (the same locks held: nothing new of those sandboxes).
    const auto left = find_leftovers(held);
    for (auto& piece : found) {
        const bool still = std::any_of(left.begin(), left.end(), [&](const Leftover& other) {
            return other.kind == piece.kind && other.name == piece.name && other.sandbox == piece.sandbox;
        });
        piece.removed = !still;
        if (still) {
            auto it = problems.find(piece.sandbox);
            piece.problem = it != problems.end() ? it->second : std::string("still there after removal");
        }
    }
    return found;
}

}  // namespace agentctl::provider::incus
