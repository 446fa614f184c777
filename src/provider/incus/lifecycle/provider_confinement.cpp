// The confinement proof of a running sandbox (the probe battery, with
// listeners on the host that no probe may reach) and `logs --network`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/host_network.hpp"
#include "provider/common/probes.hpp"
#include "provider/incus/guest/guest_proxy_scripts.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/network/netns_probes.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"

namespace agentctl::provider::incus {
namespace {

// A TCP listener on one of the host's addresses, on a port the kernel picks
// (or a given one). Connections are never answered, only counted: a probe
// that reaches it has got through.
class ProbeListener {
public:
    ProbeListener(const std::string& address, std::uint16_t port) {
        m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        if (m_fd < 0 || ::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1 ||
            ::bind(m_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(m_fd, 4) != 0) {
            m_error = std::strerror(errno);
            return;
        }
        socklen_t len = sizeof addr;
        ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&addr), &len);
        m_port = ntohs(addr.sin_port);
    }
    ~ProbeListener() {
        if (m_fd >= 0) ::close(m_fd);
    }
    ProbeListener(const ProbeListener&) = delete;
    ProbeListener& operator=(const ProbeListener&) = delete;

    [[nodiscard]] bool ok() const { return m_error.empty(); }
    [[nodiscard]] std::uint16_t port() const { return m_port; }
    [[nodiscard]] const std::string& error() const { return m_error; }
    bool reached() {
        if (!ok()) return false;
        const int client = ::accept4(m_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) return false;
        ::close(client);
        return true;
    }

private:
    int m_fd = -1;
    std::uint16_t m_port = 0;
    std::string m_error;
};

// An IPv4 address of this host that is neither loopback nor on a sandbox
// bridge: the "other host address" probes aim at it.
std::string other_host_address() {
    for (const auto& entry : policy::interface_addresses()) {
        if (entry.address.v6) continue;
        const std::string_view iface = entry.interface;
        if (iface == "lo" || iface.starts_with(k_bridge_prefix) || iface.starts_with("incusbr")) continue;
        return entry.address.to_string();
    }
    return {};
}

void escape(std::vector<common::ProbeResult>& results, const std::string& name, const std::string& detail) {
    for (auto& r : results) {
        if (r.name == name) {
            r.verdict = common::ProbeVerdict::Escaped;
            r.detail += "; " + detail;
            return;
        }
    }
    results.push_back({name, common::ProbeVerdict::Escaped, detail});
}

}  // namespace

IncusProvider::ProbeRun IncusProvider::run_probe_battery(const std::string& name, const SandboxRecord& record) {
    if (m_api.preview()) return ProbeRun::unverified(ConfinementState::NotVerified, "preview");
    if (!record.network || !record.network->enabled)
        return ProbeRun::unverified(ConfinementState::Off, "the sandbox has no network policy (--no-network-policy)");
    const auto& network = *record.network;
    const auto& bridge_address = record.subnet;
    if (!bridge_address)
        return ProbeRun::unverified(ConfinementState::NotVerified, "the bridge address is not recorded");
    const auto gateway = bridge_address->address_text();
    const bool vm = record.isolation == Isolation::Vm;
    const auto addressed = wait_for_address_state(name, vm ? 120 : 30);
    if (eth0_address(addressed).empty())
        return ProbeRun::unverified(ConfinementState::NotVerified, "the sandbox got no IPv4 address on eth0");

    const auto placement = record.placement;
    ProbeTargets targets;
    targets.gateway = gateway;
    targets.proxy = proxy_address(placement, *bridge_address).address_text();
    targets.proxy_port = k_egress_proxy_port;
    // agentctl's firewall closes the gateway's port 53 (host placement, this machine).
    targets.dns_closed = network.dns.disabled && server_is_this_machine() && egress(placement).host_firewall();
    // The canaries are listeners on this machine: they can only be reached
    // (and so prove anything) when the bridge is this machine's. Otherwise the
    // probes that need them are skipped, and the count says so.
    const bool local = server_is_this_machine();
    std::optional<ProbeListener> gateway_canary;
    if (local) {
        gateway_canary.emplace(gateway, 0);
        if (!gateway_canary->ok()) {
            return ProbeRun::unverified(ConfinementState::NotVerified,
                                        fmt::format("cannot listen on {}: {}", gateway, gateway_canary->error()));
        }
        targets.gateway_canary = gateway_canary->port();
    }
    if (local) targets.other_host_address = other_host_address();
    std::optional<ProbeListener> other_canary;
    std::optional<ProbeListener> dns_canary;  // on OTHER:53 when that port is free
    if (!targets.other_host_address.empty()) {
        other_canary.emplace(targets.other_host_address, 0);
        if (other_canary->ok()) {
            targets.other_canary = other_canary->port();
            dns_canary.emplace(targets.other_host_address, 53);
        } else {
            targets.other_host_address.clear();
        }
    }

    const auto started = std::chrono::steady_clock::now();
    ProbeRun run;
    // A container on this machine is probed from the host, in its network
    // namespace, by agentctl's own code; a VM, or a container on a server
    // elsewhere, only by the battery run in the guest: its word.
    run.by_host = local && !vm;
    std::vector<common::ProbeResult> results;
    if (run.by_host) {
        const auto pid = addressed.pid;
        try {
            const NetnsHandle netns(pid);
            // The pid is the instance's init still (not a process that took its number).
            if (m_api.instance_state(name).pid != pid) {
                return ProbeRun::unverified(ConfinementState::NotVerified, "the sandbox restarted while it was probed");
            }
            results = probe_in_namespace(netns, targets, std::chrono::seconds(2));
        } catch (const Error& e) {
            return ProbeRun::unverified(ConfinementState::NotVerified, e.what());
        }
        run.pid = pid;
    } else {
        auto result = run_as_root(name, probe_battery_script(targets, 2), 30);
        results = common::parse_probe_lines(result.out);
        for (const auto& expected : probe_names()) {
            bool seen = false;
            for (const auto& r : results) seen = seen || r.name == expected;
            if (!seen) {
                results.push_back({expected, common::ProbeVerdict::Inconclusive,
                                   fmt::format("printed no result (exit {}): {}", result.exit_code, result.err)});
            }
        }
        run.pid = m_api.instance_state(name).pid;
    }
    if (gateway_canary && gateway_canary->reached()) {
        escape(results, "host-port", "agentctl's listener on the host saw the connection");
    }
    if (other_canary && other_canary->reached()) {
        escape(results, "host-address", "agentctl's listener on the host saw the connection");
    }
    if (dns_canary && dns_canary->reached()) {
        escape(results, "dns-tcp-elsewhere", "agentctl's listener on port 53 saw the connection");
    }
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    run.results = std::move(results);
    run.elapsed = elapsed;
    run.placement = placement;
    return run;
}

ConfinementStatus IncusProvider::record_probes(const std::string& name, const ProbeRun& run,
                                               const std::map<std::string, std::string>& also) {
    const auto with_also = [&](std::map<std::string, std::string> records) {
        records.insert(also.begin(), also.end());
        return records;
    };
    if (!run.not_verified.empty()) {
        set_records(name, with_also(evidence_records(name, run, run.not_verified)));
        return run.not_verified;
    }
    const auto summary = common::summarise(run.results);
    const auto line = common::confinement_line(summary, std::chrono::system_clock::now(),
                                               run.by_host ? std::string_view{} : common::k_guest_word);
    set_records(name, with_also(evidence_records(name, run, line)));
    if (!summary.escaped.empty()) {
        m_context.reporter.step(fmt::format("stopping {}: its network policy is not in force", name));
        m_api.change_state(name, state_payload("stop", true, -1), 120);
        stop_egress_services(name, egress(run.placement));
        std::string what;
        for (const auto* r : summary.escaped) what += fmt::format("\n  {}: {}", r->name, r->detail);
        throw Error(fmt::format("network confinement of {} FAILED; the sandbox was stopped. Probes that got out:{}",
                                name, what),
                    "check the bridge's ACL (incus network show " + bridge_name(name) +
                        ") and agentctl's nft table (nft list table inet agentctl-" + bridge_name(name) + ")");
    }
    m_context.reporter.step(fmt::format("probe battery{}: {}/{} held in {} ms",
                                        run.by_host ? " (from the host, in the sandbox's network namespace)" : "",
                                        summary.held, summary.total, run.elapsed.count()));
    return line;
}

void IncusProvider::verify_confinement(const std::string& name, const SandboxRecord& record,
                                       std::future<ProbeRun> early, const std::map<std::string, std::string>& also) {
    m_context.reporter.step(fmt::format("checking network confinement of {}", name));
    const auto confinement = record_probes(name, early.valid() ? early.get() : run_probe_battery(name, record), also);
    const auto line = to_string(confinement);
    if (confinement.state == ConfinementState::Verified) {
        m_context.reporter.notice("network confinement " + line);
    } else if (!m_api.preview()) {
        m_context.reporter.warning(fmt::format("{}: network confinement {}", name, line));
    }
}

int IncusProvider::logs(const std::string& given, const LogRequest& request) {
    const auto name = instance_of(given);
    const auto record = read_sandbox_record(require_instance(name));
    return egress(record.placement).print_network_log(site_of(name, record), request, m_context.out);
}

}  // namespace agentctl::provider::incus
