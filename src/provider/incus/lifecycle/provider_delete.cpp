// delete: a sandbox's instance, bridge, ACL and host pieces, each only if
// ours, also what an interrupted create or delete left.
#include <chrono>
#include <exception>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"

namespace agentctl::provider::incus {

int IncusProvider::remove_pieces(const std::string& name) {
    int found = 0;
    // A create that failed after booting leaves the instance running, and Incus
    // deletes only stopped instances. (Callers have checked that it is ours.)
    const auto instance = m_api.instance(name);
    if (instance && instance->running()) m_api.change_state(name, state_payload("stop", true, -1), 120);
    // A preview asks for the companion only when the sandbox records one; a
    // real delete always looks (a create may have stopped before recording).
    // (Only this key is read: a sandbox whose record is damaged can still be deleted.)
    const bool companion =
        !m_api.preview() || (instance && instance->config_value(key::k_egress) == to_string(ProxyPlacement::Instance));
    const auto bridge = bridge_name(name);
    auto network = m_api.network(bridge);
    // Where its host processes' files are and who they run as: recorded on the
    // instance, else on the bridge (a create stopped before the instance was
    // made), whatever this agentctl's state directory is.
    EgressSite site{name, bridge, {}, {}, {}};
    const auto network_config =
        network && owner_of(*network) == name ? network->value("config", Json::object()) : Json::object();
    for (const auto& config : {instance ? Json(instance->config) : Json::object(), network_config}) {
        if (site.host.recorded()) continue;
        try {
            site.host = parse_host_record(config);
        } catch (const Error& e) {
            m_context.reporter.warning(fmt::format("{}: {}", name, e.what()));
        }
    }
    // While the instance exists its enforcement stays: a failure here leaves everything.
    if (m_api.delete_instance(name)) ++found;
    // From here on each piece goes even when another could not: the first
    // failure is thrown at the end, and the next delete finds what is left.
    // Only the order Incus and the host need is kept: the processes stop
    // before the bridge that records their uid goes (deleting it releases the
    // uid) and before their state, the companion before its bridge, the
    // bridge before its ACL.
    std::exception_ptr failed;
    const auto attempt = [&](const std::function<void()>& step) {
        try {
            step();
            return true;
        } catch (...) {
            if (!failed) failed = std::current_exception();
            return false;
        }
    };
    // Their pid records are in the state directory: it stays while they may run.
    const bool stopped = attempt([&] { stop_egress_services(site, *m_egress); });
    // The companion instance (instance placement) goes before its bridge can.
    const bool companion_gone = !companion || attempt([&] { m_egress_instance->remove_state(site); });
    const bool bridge_gone = stopped && companion_gone && attempt([&] { found += remove_bridge(name) ? 1 : 0; });
    attempt([&] { m_egress->remove_firewall(bridge); });
    if (stopped) attempt([&] { m_egress->remove_state(site); });
    if (bridge_gone) attempt([&] { found += remove_acl(name) ? 1 : 0; });
    if (failed) std::rethrow_exception(failed);
    return found;
}

bool IncusProvider::remove_bridge(const std::string& name) {
    const auto bridge = bridge_name(name);
    auto network = m_api.network(bridge);
    // A create killed while Incus was still setting the bridge up leaves it
    // "Pending"; deleting it then would orphan its dnsmasq. Let it finish first.
    // In a cluster, a create killed between the per-member definitions and the
    // global create leaves it pending for good, without config: Incus refuses
    // every key but the member-specific ones on a pending definition, so only
    // its name (agentctl's, derived from the sandbox's) says whose it is.
    const auto pending = [](const Json& net) { return incus_status(net) == IncusStatus::Pending; };
    const auto never_created = [&](const Json& net) { return pending(net) && owner_of(net).empty(); };
    for (int i = 0; i < 300 && network && pending(*network) && !never_created(*network); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        network = m_api.network(bridge);
    }
    if (!network) return false;
    const auto owner = owner_of(*network);
    if ((owner == name && project_of(*network) == m_project) || never_created(*network)) {
        m_context.reporter.step(fmt::format("deleting bridge {}", bridge));
        const auto lock = lock_network();
        return m_api.delete_network(bridge);
    }
    const auto project = project_of(*network);
    m_context.reporter.warning(fmt::format("network {} belongs to \"{}\"{}, not to {}; left alone", bridge, owner,
                                           project == m_project ? std::string()
                                           : project.empty()    ? std::string(" of the default project")
                                                                : " of project " + project,
                                           name));
    return false;
}

bool IncusProvider::remove_acl(const std::string& name) {
    const auto acl = m_api.acl(acl_name(name));
    if (!acl) return false;
    if (owner_of(*acl) != name || project_of(*acl) != m_project) {
        m_context.reporter.warning(
            fmt::format("network ACL {} is not {}'s (another project's sandbox, or not agentctl's); left alone",
                        acl_name(name), name));
        return false;
    }
    m_context.reporter.step(fmt::format("deleting network ACL {}", acl_name(name)));
    return m_api.delete_acl(acl_name(name));
}

Json IncusProvider::in_project(Json payload) const {
    if (!m_project.empty()) payload["config"][std::string(key::k_project)] = m_project;
    return payload;
}

std::string IncusProvider::owner_of(const Json& piece) { return config_text(piece, key::k_sandbox); }

std::string IncusProvider::project_of(const Json& piece) { return config_text(piece, key::k_project); }

void IncusProvider::refuse_name_of_other_project(const std::string& name) {
    const auto bridge = m_api.network(bridge_name(name));
    const auto acl = m_api.acl(acl_name(name));
    for (const auto* piece : {&bridge, &acl}) {
        if (!*piece) continue;
        const auto owner = owner_of(**piece);
        const auto project = project_of(**piece);
        if (owner != name || project == m_project) continue;
        throw Error(fmt::format("a sandbox named \"{}\" already exists in the Incus project {} on this server", name,
                                project.empty() ? "default" : project),
                    "sandbox names are unique across projects (their bridges and ACLs share the default project): "
                    "pick another name");
    }
}

void IncusProvider::remove(const std::string& given, bool force) {
    // An agentctl killed mid-create leaves its operations running in the
    // daemon, and while they run the instance is busy and its bridge in use:
    // wait for them and retry, for a bounded time.
    const auto lock = lock_sandbox(given);
    // A sandbox from the pool: its instance's lock too (gc and pool fill take that one).
    const auto name = instance_of(given);
    const auto instance_lock = name == given ? nullptr : lock_sandbox(name);
    retry_transient(
        [&] {
            if (m_api.wait_for_instance_operations(name, 120) > 0) {
                m_context.reporter.step(fmt::format("waited for an unfinished operation on {}", name));
            }
            remove_once(name, force);
        },
        std::chrono::seconds(180));
}

void IncusProvider::remove_once(const std::string& name, bool force) {
    if (auto instance = m_api.instance(name)) {
        const auto marks = read_instance_marks(*instance);
        if (marks.role == key::k_role_egress_proxy) {
            throw Error(fmt::format("the Incus instance \"{}\" is the egress proxy of sandbox {}, not a sandbox", name,
                                    marks.sandbox),
                        "delete the sandbox: agentctl delete " + marks.sandbox);
        }
        if (!marks.managed) {
            throw Error(fmt::format("the Incus instance \"{}\" was not created by agentctl", name),
                        "agentctl only deletes its own sandboxes; use `incus delete` for others");
        }
        if (instance->running()) {
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

}  // namespace agentctl::provider::incus
