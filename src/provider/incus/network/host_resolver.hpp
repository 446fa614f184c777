// The sandbox's resolver and DHCP server, run by agentctl on the host where
// the bridge lives: dnsmasq bound to the bridge, as the sandbox's own
// unprivileged uid (host_user.hpp).
//
// Incus could run it (a managed bridge's own dnsmasq, `raw.dnsmasq`), but it
// waits half a second after every start of that dnsmasq to see that it did not
// exit, and restarts it on every configuration change: a fixed cost on each
// create and each `policy add`. agentctl's dnsmasq answers as soon as it
// listens; its whole configuration is its command line (no file the
// unprivileged process would have to read), and a policy change restarts it
// in a few milliseconds. The bridge then has Incus's DHCP and DNS turned off
// (`ipv4.dhcp=false`, `dns.mode=none`).
//
// What it answers: names allowlisted by the policy (and their subdomains) are
// forwarded to the upstream resolvers; every other name is answered NXDOMAIN
// locally (`address=/#/`); a sandbox whose policy was detached gets every
// name forwarded instead. It leases the sandbox its one fixed address (the
// range holds that address only) and names itself router and resolver.
#pragma once

#include <string>
#include <vector>

namespace agentctl::provider::incus {

struct ResolverSpec {
    std::string bridge;   // agc-...
    std::string gateway;  // the bridge's host address: listens on port 53 there
    std::string guest;    // the one address it leases
    std::string netmask;  // of the bridge's subnet, dotted
    // Where names go: dns_servers(), each a value of dnsmasq's `server`.
    std::vector<std::string> servers;
    // True: names no server names are answered NXDOMAIN. False (the sandbox
    // has no network policy): the servers forward every name.
    bool allowlist_only = true;

    bool operator==(const ResolverSpec&) const = default;
};

// dnsmasq's command line: in the foreground (the caller detaches it), no
// configuration file, no /etc/hosts or /etc/resolv.conf, bound to the bridge
// only, logging to stderr. It is started as the sandbox's own uid with the
// few capabilities it needs (never as root), so it changes no user itself
// (`--user=` and `--group=` empty: no user or group to look up), and writes
// no file: no pid file (agentctl records the process it started), the one
// lease in memory only.
[[nodiscard]] std::vector<std::string> resolver_arguments(const std::string& dnsmasq, const ResolverSpec& spec);

}  // namespace agentctl::provider::incus
