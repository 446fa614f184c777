// Where a sandbox's egress enforcement runs: its egress proxy, its resolver
// (host_resolver.hpp) and the host firewall table of its bridge. Two
// placements of the proxy sit behind this interface:
//   host      the proxy is a detached process on this machine, listening on
//             the bridge's host address (make_local_egress_host);
//   instance  the proxy runs in a small companion container `NAME-egress` on
//             the sandbox's own bridge, under systemd, as nobody
//             (make_instance_egress_host); this is the placement for an Incus
//             server that is not this machine.
// The host firewall table and agentctl's resolver exist only where the bridge
// is on this machine; elsewhere the bridge's own dnsmasq (raw.dnsmasq) resolves.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agentctl/policy.hpp"
#include "agentctl/provider.hpp"
#include "provider/incus/network/host_firewall.hpp"
#include "provider/incus/network/host_resolver.hpp"
#include "provider/incus/network/host_user.hpp"
#include "provider/incus/network/subnet_pool.hpp"

namespace agentctl::provider::incus {

class Client;

// The port every sandbox's egress proxy listens on, on its own bridge's host
// address (each bridge has its own address, so one fixed port serves all).
inline constexpr std::uint16_t k_egress_proxy_port = 3128;
// The resolver's port, on the same address.
inline constexpr std::uint16_t k_dns_port = 53;

enum class ProxyPlacement { Host, Instance };

// "host" | "instance" (the setting's words and the sandbox's record).
[[nodiscard]] std::string_view to_string(ProxyPlacement placement);

// The one place that decides incus.proxyPlacement: `instance` is taken as
// given, `host` too when the server is this machine; `auto` (or empty) is the
// host when the server is this machine, else the instance. Throws
// agentctl::Error for another word, and for `host` with a server elsewhere.
[[nodiscard]] ProxyPlacement choose_proxy_placement(std::string_view setting, bool server_local);

// Where a sandbox's proxy listens: the bridge's host address (host placement)
// or the companion's fixed address, the subnet's third host (instance).
[[nodiscard]] Ipv4Net proxy_address(ProxyPlacement placement, const Ipv4Net& bridge);

// What a proxy is started for: the sandbox, its bridge and subnet (the
// bridge's host address, with the prefix), the image the sandbox came
// from (the companion instance is created from it), and who its host
// processes run as and where their files are (not recorded: a sandbox made
// before it had ids of its own, which runs them as nobody with its files in
// this agentctl's state directory).
struct EgressSite {
    std::string sandbox;
    std::string bridge;
    Ipv4Net subnet;
    std::string image;
    HostRecord host;
};

// The files in a sandbox's host directory (EgressSite::host.state_dir) that
// record the proxy and the resolver agentctl started (process_identity.hpp).
[[nodiscard]] std::string proxy_record_path(const std::string& state_dir);
[[nodiscard]] std::string resolver_record_path(const std::string& state_dir);

struct ProxyStatus {
    int pid = 0;       // 0: not running (as agentctl started it)
    unsigned uid = 0;  // the user it runs as, while running
    std::string listen;
    std::string log_path;
    std::string instance;  // the companion's name (instance placement), else empty
    std::string problem;   // why it is not running, when known
};

class EgressHost {
public:
    virtual ~EgressHost() = default;

    // Writes the policy file the proxy enforces (atomically); a running proxy
    // is told to reload it (SIGHUP).
    virtual void write_policy(const EgressSite& site, const policy::NetworkPolicy& network) = 0;
    // Starts the sandbox's proxy on proxy_address(placement(), site.subnet):
    // k_egress_proxy_port unless it is already running there. Throws
    // agentctl::Error when it does not come up.
    virtual void start_proxy(const EgressSite& site) = 0;
    // Stops it (only the process agentctl started, process_identity.hpp);
    // true if one was running. Throws agentctl::Error when it outlives
    // SIGKILL's wait (common::terminate).
    virtual bool stop_proxy(const EgressSite& site) = 0;
    [[nodiscard]] virtual ProxyStatus proxy_status(const EgressSite& site) = 0;
    // Prints the proxy's decision log (`logs --network`); returns the exit code.
    virtual int print_network_log(const EgressSite& site, const LogRequest& request, std::ostream& out) = 0;
    // True when this host runs the sandbox's resolver (start_resolver); false:
    // the bridge's own dnsmasq, configured through Incus (raw.dnsmasq), is it.
    [[nodiscard]] virtual bool runs_resolver() const = 0;
    // Starts the sandbox's resolver unless it is already running (`restart`:
    // stops a running one first, so that it takes `spec`). Throws
    // agentctl::Error when it does not come up.
    virtual void start_resolver(const EgressSite& site, const ResolverSpec& spec, bool restart) = 0;
    // Stops it as stop_proxy does; true if one was running.
    virtual bool stop_resolver(const EgressSite& site) = 0;
    // Its pid, 0 when it is not running (as agentctl started it).
    [[nodiscard]] virtual int resolver_pid(const EgressSite& site) = 0;
    // (Re)defines / removes the bridge's firewall table. Idempotent.
    virtual void install_firewall(const FirewallSpec& spec) = 0;
    virtual void remove_firewall(const std::string& bridge) = 0;
    // Forgets tracked connections from `sources` to `destinations` (so that a
    // narrowed ACL also cuts connections that were already open). Returns a
    // sentence when it could not, else empty.
    virtual std::string forget_connections(const std::vector<std::string>& sources,
                                           const std::vector<std::string>& destinations) = 0;
    // Removes the sandbox's proxy state (policy, log, pid file, cgroup; the
    // companion instance). Runs before the bridge is deleted.
    virtual void remove_state(const EgressSite& site) = 0;
    [[nodiscard]] virtual ProxyPlacement placement() const = 0;
    // Whether agentctl's nft table guards the bridge (the bridge is on this machine).
    [[nodiscard]] virtual bool host_firewall() const = 0;
    // Lifecycle::refresh_secret for the proxies this host runs: each sandbox
    // whose record uses `secret` and whose proxy runs gets its payload again
    // on the proxy's secrets socket (egress_proxy/secret_rotation.hpp).
    [[nodiscard]] virtual std::vector<std::string> refresh_secret(const std::string& secret) {
        (void)secret;
        return {};
    }
};

// Runs the proxy and the resolver as detached local processes, as the
// sandbox's own unprivileged uid (host_user.hpp), in its cgroup
// (host_cgroup.hpp); keeps their files in the recorded directory
// (STATE_DIR/incus/NAME/ of the agentctl that created it); runs `nft` and
// `conntrack` locally.
[[nodiscard]] std::unique_ptr<EgressHost> make_local_egress_host(ProviderContext& context);

// --preview: reports each step, changes nothing.
[[nodiscard]] std::unique_ptr<EgressHost> make_preview_egress_host(ProviderContext& context);

// The companion-instance placement (egress_instance.cpp) over `client` (its
// calls are printed under --preview). `host_side` runs the firewall table and
// conntrack when the server is this machine; null when it is not (then they
// are skipped: Incus's bridge ACL is the only enforcement point).
[[nodiscard]] std::unique_ptr<EgressHost> make_instance_egress_host(ProviderContext& context, Client& client,
                                                                    std::unique_ptr<EgressHost> host_side);

}  // namespace agentctl::provider::incus
