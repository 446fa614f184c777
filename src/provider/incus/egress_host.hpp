// Where a sandbox's egress enforcement runs: its egress proxy process, its
// resolver (host_resolver.hpp) and the host firewall table of its bridge. Today both run on this machine, next to
// the local Incus daemon (make_local_egress_host); a remote Incus server needs
// them next to that server instead, behind this same interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentctl/policy.hpp"
#include "agentctl/provider.hpp"
#include "provider/incus/host_firewall.hpp"
#include "provider/incus/host_resolver.hpp"

namespace agentctl::provider::incus {

// The port every sandbox's egress proxy listens on, on its own bridge's host
// address (each bridge has its own address, so one fixed port serves all).
inline constexpr std::uint16_t k_egress_proxy_port = 3128;
// The resolver's port, on the same address.
inline constexpr std::uint16_t k_dns_port = 53;

struct ProxyStatus {
    int pid = 0;  // 0: not running
    std::string listen;
    std::string log_path;
};

class EgressHost {
public:
    virtual ~EgressHost() = default;

    // Writes the policy file the proxy enforces (atomically); a running proxy
    // is told to reload it (SIGHUP).
    virtual void write_policy(const std::string& sandbox, const policy::NetworkPolicy& network) = 0;
    // Starts the sandbox's proxy on ADDRESS:k_egress_proxy_port unless it is
    // already running there. Throws agentctl::Error when it does not come up.
    virtual void start_proxy(const std::string& sandbox, const std::string& address) = 0;
    // Stops it; true if one was running.
    virtual bool stop_proxy(const std::string& sandbox) = 0;
    [[nodiscard]] virtual ProxyStatus proxy_status(const std::string& sandbox, const std::string& address) = 0;
    // True when this host runs the sandbox's resolver (start_resolver); false:
    // the bridge's own dnsmasq, configured through Incus (raw.dnsmasq), is it.
    [[nodiscard]] virtual bool runs_resolver() const = 0;
    // Starts the sandbox's resolver unless it is already running (`restart`:
    // stops a running one first, so that it takes `spec`). Throws
    // agentctl::Error when it does not come up.
    virtual void start_resolver(const std::string& sandbox, const ResolverSpec& spec, bool restart) = 0;
    // Stops it; true if one was running.
    virtual bool stop_resolver(const std::string& sandbox) = 0;
    // Its pid, 0 when it is not running.
    [[nodiscard]] virtual int resolver_pid(const std::string& sandbox) = 0;
    // (Re)defines / removes the bridge's firewall table. Idempotent.
    virtual void install_firewall(const FirewallSpec& spec) = 0;
    virtual void remove_firewall(const std::string& bridge) = 0;
    // Forgets tracked connections from `sources` to `destinations` (so that a
    // narrowed ACL also cuts connections that were already open). Returns a
    // sentence when it could not, else empty.
    virtual std::string forget_connections(const std::vector<std::string>& sources,
                                           const std::vector<std::string>& destinations) = 0;
    // Removes the sandbox's proxy state (policy, log, pid file).
    virtual void remove_state(const std::string& sandbox) = 0;
    // The uid the proxies run as (the firewall names it).
    [[nodiscard]] virtual unsigned proxy_uid() const = 0;
};

// Runs the proxy as a detached local process (as the unprivileged user
// `nobody`), keeps its files under STATE_DIR/incus/NAME/, and runs
// `nft` and `conntrack` locally.
[[nodiscard]] std::unique_ptr<EgressHost> make_local_egress_host(ProviderContext& context);

// --preview: reports each step, changes nothing.
[[nodiscard]] std::unique_ptr<EgressHost> make_preview_egress_host(ProviderContext& context);

}  // namespace agentctl::provider::incus
