// What a sandbox's "verified" rests on, and what start puts back: the bridge
// ACL attached, agentctl's nft table as it was verified, the egress proxy and
// the resolver running, and the very instance that was probed still running.
// status checks all of it each time. On this machine it reads, while the
// instance's own GET runs (start_status_queries), agentctl's nft table and
// the chain Incus made of the bridge's ACL from the kernel; the bridge is
// asked for only when that chain is not as verified (or not recorded), the
// ACL only when the bridge does not list it, and the instance's state only
// when /proc does not show the verified init still running (judge_confinement).
#include <chrono>
#include <future>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agentctl/error.hpp"
#include "core/utc_time.hpp"
#include "provider/incus/lifecycle/instance_init.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"
#include "provider/incus/network/nft_kernel.hpp"
#include "provider/incus/network/nft_library.hpp"
#include "provider/incus/network/proxy_instance.hpp"

namespace agentctl::provider::incus {
namespace {

bool acl_attached(const Json& bridge, const std::string& acl) {
    const auto& config = bridge.value("config", Json::object());
    const auto acls = config.value("security.acls", std::string());
    bool listed = false;
    std::size_t start = 0;
    while (start <= acls.size()) {
        auto comma = acls.find(',', start);
        if (comma == std::string::npos) comma = acls.size();
        listed = listed || acls.substr(start, comma - start) == acl;
        start = comma + 1;
    }
    return listed && config.value("security.acls.default.egress.action", std::string()) == "reject" &&
           config.value("security.acls.default.ingress.action", std::string()) == "reject";
}

// "7/7 probes, TIME" from a recorded "(7/7 probes, TIME)".
std::string unparenthesised(const std::string& detail) {
    if (detail.size() >= 2 && detail.front() == '(' && detail.back() == ')') return detail.substr(1, detail.size() - 2);
    return detail;
}

Json acl_patch(const std::string& acl) {
    return Json{{"security.acls", acl},
                {"security.acls.default.egress.action", "reject"},
                {"security.acls.default.ingress.action", "reject"}};
}

// Whether a digest is to be made as `recorded` was: a kernel digest unless
// the record holds an nft_digest.
bool kernel_kind(const std::string& recorded) { return recorded.empty() || is_kernel_digest(recorded); }

// The time since `started`, for -v.
long long milliseconds_since(std::chrono::steady_clock::time_point started) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
}

}  // namespace

std::string IncusProvider::nft_digest(const std::string& listing) {
    const auto started = std::chrono::steady_clock::now();
    // In process (nft_library.hpp); the nft command where libnftables cannot
    // be loaded (it prints the same text).
    auto text = nft_output_in_process(listing);
    if (text) {
        spdlog::info("libnftables: nft {} -> {} ({} ms)", listing, text->empty() ? "refused" : "listed",
                     milliseconds_since(started));
    } else {
        ProcessRequest request;
        request.argv = {"nft", listing};
        request.timeout = std::chrono::seconds(10);
        try {
            const auto result = m_context.runner.run(request);
            text = result.ok() ? result.out : std::string();
        } catch (const Error&) {
            return {};
        }
    }
    if (text->empty()) return {};
    return fmt::format("{:016x}", fnv1a64(*text));
}

std::string IncusProvider::firewall_digest(const std::string& bridge, const std::string& recorded) {
    const auto table = firewall_table(bridge);
    if (kernel_kind(recorded)) {
        const auto started = std::chrono::steady_clock::now();
        if (auto digest = nft_inet_table_digest(table)) {
            spdlog::info("nf_tables: table inet {} -> {} ({} ms)", table, digest->empty() ? "missing" : *digest,
                         milliseconds_since(started));
            return *digest;
        }
    }
    return nft_digest(fmt::format("list table inet {}", table));
}

std::string IncusProvider::acl_chain_digest(const std::string& bridge, const std::string& recorded) {
    const auto chain = incus_acl_chain(bridge);
    if (kernel_kind(recorded)) {
        const auto started = std::chrono::steady_clock::now();
        if (auto digest = nft_inet_chain_digest(std::string(k_incus_table), chain)) {
            spdlog::info("nf_tables: chain inet {} {} -> {} ({} ms)", k_incus_table, chain,
                         digest->empty() ? "missing" : *digest, milliseconds_since(started));
            return *digest;
        }
    }
    return nft_digest(fmt::format("list chain inet {} {}", k_incus_table, chain));
}

void IncusProvider::reattach_acl(const std::string& name, const AclRules& rules, const std::optional<Json>& network) {
    const auto acl = acl_name(name);
    const auto bridge = bridge_name(name);
    auto payload = in_project(acl_payload(name, rules));
    if (m_api.acl(acl)) {
        m_api.put_acl(acl, payload);
    } else {
        m_context.reporter.step(fmt::format("creating network ACL {} again (it was missing)", acl));
        m_api.create_acl(payload);
    }
    if (!network) throw Error(fmt::format("the bridge {} of {} is missing", bridge, name), "recreate the sandbox");
    if (acl_attached(*network, acl)) return;
    m_context.reporter.step(fmt::format("attaching network ACL {} to bridge {} again (it was detached)", acl, bridge));
    patch_bridge(bridge, acl_patch(acl));
}

std::map<std::string, std::string> IncusProvider::evidence_records(const std::string& name, const ProbeRun& run,
                                                                   const ConfinementStatus& line) {
    Json probes = Json::array();
    for (const auto& r : run.results) {
        probes.push_back({{"name", r.name}, {"verdict", common::to_string(r.verdict)}, {"detail", r.detail}});
    }
    const bool probed = run.not_verified.empty();
    std::string firewall;
    std::string acl_chain;
    if (probed && egress(run.placement).host_firewall()) {
        firewall = firewall_digest(bridge_name(name));
        acl_chain = acl_chain_digest(bridge_name(name));
    }
    return {{std::string(key::k_confinement), to_string(line)},
            {std::string(key::k_confinement_probes), probes.dump()},
            {std::string(key::k_confinement_source), probed ? (run.by_host ? "host" : "guest") : ""},
            {std::string(key::k_confinement_at), core::utc_stamp(std::chrono::system_clock::now())},
            {std::string(key::k_confinement_pid), probed && run.pid > 0 ? std::to_string(run.pid) : ""},
            {std::string(key::k_confinement_firewall), firewall},
            {std::string(key::k_confinement_acl_chain), acl_chain}};
}

std::string IncusProvider::strangers_problem(const std::string& name, const std::string& bridge, const Json& network) {
    const auto strangers = bridge_strangers(network, name, m_project);
    if (strangers.empty()) return {};
    std::string list;
    for (const auto& stranger : strangers) list += (list.empty() ? "" : ", ") + stranger;
    return fmt::format(
        "{} {} on the sandbox's bridge {} besides it and its egress proxy {} (the bridge admits the "
        "proxy by its address, which anything on the bridge can take while the proxy is stopped)",
        list, strangers.size() == 1 ? "is" : "are", bridge, companion_name(name));
}

void IncusProvider::read_evidence(const Instance& instance, const SandboxRecord& record, InstanceInfo& info) {
    info.evidence = record.evidence;
    const auto recorded = info.confinement;
    if (!instance.running() && recorded.state == ConfinementState::Verified) {
        info.confinement = {ConfinementState::NotVerified,
                            fmt::format("the sandbox is not running (last verified: {}); `agentctl start {}` "
                                        "checks it again",
                                        unparenthesised(recorded.detail), info.name)};
    }
}

IncusProvider::StatusQueries IncusProvider::start_status_queries(const std::string& name) {
    StatusQueries queries;
    // Under --preview every call is printed instead: only the calls status
    // needs (judge_confinement skips them all there).
    if (m_api.preview()) return queries;
    const auto bridge = bridge_name(name);
    // On this machine the kernel shows what enforces the sandbox's policy:
    // agentctl's table and the chain Incus made of the bridge's ACL. Only
    // when that chain is not as verified (or not recorded) is the bridge
    // asked for (judge_confinement).
    if (server_is_this_machine() && egress(ProxyPlacement::Host).host_firewall()) {
        queries.kernel = std::async(std::launch::async, [this, bridge] {
            return std::pair{firewall_digest(bridge), acl_chain_digest(bridge)};
        });
        return queries;
    }
    // The Incus client opens a connection of its own for each request, so the
    // GET can run beside the instance's.
    queries.bridge = std::async(std::launch::async, [this, bridge] { return m_api.network(bridge); });
    return queries;
}

void IncusProvider::judge_confinement(const std::string& name, const Instance& instance, const SandboxRecord& record,
                                      InstanceInfo& info, StatusQueries& early) {
    if (!info.network || !info.network->enabled || m_api.preview() || !instance.running()) return;
    const auto recorded = info.confinement;
    auto& missing = info.evidence.missing;
    // The init pid: the verified one while this host's /proc shows it is still
    // the container's init (no request); else from the instance's state.
    auto pid = instance.state ? instance.state->pid : 0;
    if (pid <= 0 && server_is_this_machine() && is_container_init(record.confinement_pid, m_project, name)) {
        pid = record.confinement_pid;
    }
    if (pid <= 0) pid = m_api.instance_state(name).pid;
    if (recorded.state == ConfinementState::Verified &&
        (record.confinement_pid <= 0 || record.confinement_pid != pid)) {
        missing.push_back(
            "the sandbox was started again without agentctl (incus start?) since it was verified: its mounts "
            "and network were not checked");
    }
    const auto acl = acl_name(name);
    const auto bridge = bridge_name(name);
    std::optional<std::pair<std::string, std::string>> kernel;
    if (early.kernel.valid()) {
        kernel = early.kernel.get();
        // A record made before kernel digests: nft's listings again.
        if (!kernel_kind(record.confinement_firewall)) {
            kernel->first = firewall_digest(bridge, record.confinement_firewall);
        }
        if (!kernel_kind(record.confinement_acl_chain)) {
            kernel->second = acl_chain_digest(bridge, record.confinement_acl_chain);
        }
    }
    // The chain Incus made of the ACL as it was verified: the bridge's
    // traffic meets the rules the probes met, and Incus need not be asked.
    const bool chain_as_verified = record.placement == ProxyPlacement::Host && kernel &&
                                   !record.confinement_acl_chain.empty() &&
                                   kernel->second == record.confinement_acl_chain;
    std::optional<Json> network;
    if (!chain_as_verified || record.placement == ProxyPlacement::Instance) {
        network = early.bridge.valid() ? early.bridge.get() : m_api.network(bridge);
    }
    // Else: Incus refuses to delete or rename an ACL a network lists in
    // security.acls ("Cannot delete an ACL that is in use"), and to list one
    // that does not exist: an ACL the bridge lists exists. Only when it does
    // not is the ACL asked for, to tell a missing ACL from a detached one.
    if (!chain_as_verified) {
        if (!network || !acl_attached(*network, acl)) {
            missing.push_back(m_api.acl(acl)
                                  ? fmt::format("the network ACL {} is not attached to bridge {}", acl, bridge)
                                  : fmt::format("the network ACL {} does not exist", acl));
        } else if (kernel && !record.confinement_acl_chain.empty() && recorded.state == ConfinementState::Verified) {
            missing.push_back(
                fmt::format("the nft rules Incus made of the network ACL {} for bridge {} are not the "
                            "ones that were verified (the ACL was changed)",
                            acl, bridge));
        }
    }
    if (record.placement == ProxyPlacement::Instance && network) {
        if (auto why = strangers_problem(name, bridge, *network); !why.empty()) missing.push_back(std::move(why));
    }
    auto& host = egress(record.placement);
    if (host.host_firewall()) {
        const auto table = "nft table inet " + firewall_table(bridge);
        const auto digest = kernel ? kernel->first : firewall_digest(bridge, record.confinement_firewall);
        if (digest.empty()) {
            missing.push_back(fmt::format("agentctl's {} does not exist", table));
        } else if (recorded.state == ConfinementState::Verified && digest != record.confinement_firewall) {
            missing.push_back(fmt::format("agentctl's {} is not the one that was verified (it was changed)", table));
        }
    }
    if (info.egress_proxy && !info.egress_proxy->running) missing.push_back("the egress proxy is not running");
    if (info.resolver && info.resolver->where == "host" && !info.resolver->running) {
        missing.push_back("the resolver is not running");
    }
    if (missing.empty()) return;
    std::string what;
    for (const auto& m : missing) what += (what.empty() ? "" : "; ") + m;
    info.confinement = {ConfinementState::NotVerified,
                        fmt::format("{}; `agentctl start {}` restores and checks it{}", what, name,
                                    recorded.state == ConfinementState::Verified
                                        ? fmt::format(" (last verified: {})", unparenthesised(recorded.detail))
                                        : std::string())};
}

}  // namespace agentctl::provider::incus
