// The sandbox's resolver and DHCP server, run by agentctl on the host where
// the bridge lives: dnsmasq bound to the bridge, as an unprivileged user.
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
    // Where names go: dns_server_lines(), one `server=...` per line.
    std::string server_lines;
    // True: names no server line names are answered NXDOMAIN. False (the
    // sandbox has no network policy): the server lines forward every name.
    bool allowlist_only = true;

    bool operator==(const ResolverSpec&) const = default;
};

// Where one sandbox's resolver keeps its files (absolute paths; dnsmasq
// writes both while it is still root).
struct ResolverFiles {
    std::string pid;     // written by dnsmasq
    std::string leases;  // its DHCP lease database
};

// dnsmasq's command line: in the foreground (the caller detaches it), no
// configuration file, no /etc/hosts or /etc/resolv.conf, bound to the bridge
// only, dropping to `user`/`group` once its sockets are open, logging to
// stderr.
[[nodiscard]] std::vector<std::string> resolver_arguments(const std::string& dnsmasq, const ResolverSpec& spec,
                                                          const ResolverFiles& files, const std::string& user,
                                                          const std::string& group);

}  // namespace agentctl::provider::incus
