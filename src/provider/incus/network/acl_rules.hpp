// The network side of a sandbox's policy on its Incus bridge: the ACL rules
// and the bridge dnsmasq's configuration. Both are pure builders.
//
// What the bridge admits (the ACL's default egress action is reject, so
// everything else is refused at once):
//   proxy     tcp to the bridge's host address on the egress proxy's port.
//             Every host-name, wildcard and --allow-lan destination is
//             reached through the proxy, which resolves each connection's
//             name and vets every address with policy::decide().
//   IP rules  one rule per IP-literal allow entry that policy::pre_decide()
//             allows (so `policy check` and the ACL agree), tcp, its ports
//             (none listed = any TCP port). Any TCP client reaches those
//             directly, without the proxy.
// DNS and DHCP to the bridge's host address are admitted by Incus before any
// ACL rule; the resolver there answers only allowlisted names
// (dns_servers). No rule names port 53 anywhere else.
//
// With the proxy in a companion instance on the same bridge (instance
// placement) every rule names its source:
//   proxy     from the sandbox's address, tcp to the companion's address on
//             the proxy's port;
//   IP rules  from the sandbox's address, as above;
//   reject    from the companion, to the bridge's host address, this host's
//             IPv4 addresses and the sandbox subnet pool (its own resolver
//             is still admitted by Incus);
//   outside   from the companion, tcp to anything else: the proxy vets every
//             address itself (no loopback, host, LAN unless --allow-lan).
// Incus bridge ACLs apply where traffic leaves or enters the bridge (the
// host, the outside), not between two instances on it: the sandbox reaching
// the companion is a matter of what the companion listens on (only the
// proxy's port).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "agentctl/policy.hpp"
#include "agentctl/sandbox.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/network/host_firewall.hpp"
#include "provider/incus/network/subnet_pool.hpp"

namespace agentctl::provider::incus {

struct AclContext {
    std::string gateway;           // the bridge's host address
    std::uint16_t proxy_port = 0;  // the egress proxy's port on it
    // This host's own addresses: an IP rule naming one is never added.
    std::vector<policy::IpAddress> host_own;
    // Instance placement: the companion's address (empty: host placement),
    // the sandbox's address, and more ranges the companion may not reach
    // (CIDR, e.g. the subnet pool of every sandbox bridge).
    std::string proxy_instance;
    std::string sandbox;
    std::vector<std::string> proxy_refused;
};

struct AclRules {
    Json egress = Json::array();
    // One sentence per allow entry that did not become a rule (an IP the
    // decision refuses), for a warning line.
    std::vector<std::string> notes;
    // The IP-literal destinations the rules admit, for the host firewall
    // table and so that a policy change can forget the connections of
    // removed ones.
    std::vector<DirectDestination> direct;
};

// The pure builder. Rules are de-duplicated (same destination and ports).
[[nodiscard]] AclRules build_acl_rules(const policy::NetworkPolicy& policy, const AclContext& context);

// The ACL object for POST /1.0/network-acls (or PUT without `name`).
[[nodiscard]] Json acl_payload(const std::string& sandbox, const AclRules& rules);

// The allowlist of a sandbox's resolver, as values of dnsmasq's `server`
// option (the one list both of agentctl's dnsmasq command line and Incus's
// raw.dnsmasq are written from): `/NAME/UPSTREAM` per allowlisted name and
// upstream (dnsmasq forwards the name and its subdomains there),
// `/*.DOMAIN/UPSTREAM` for a wildcard domain no exact rule names (its
// subdomains only, not the apex the proxy would refuse); nothing with
// dns.disabled; `UPSTREAM` per upstream (every name) when the policy is off.
// `upstreams`: policy.dns.servers when set, else the host's resolvers.
[[nodiscard]] std::vector<std::string> dns_servers(const policy::NetworkPolicy& policy,
                                                   std::span<const std::string> upstreams);

// The bridge's `raw.dnsmasq` when Incus runs the resolver of a confined
// sandbox (host_resolver.hpp says when agentctl does): no upstream from
// resolv.conf (`no-resolv`), no CHAOS answers (`no-ident`), `server=` each of
// `servers` (dns_servers), and `address=/#/` so every other name is answered
// NXDOMAIN locally.
[[nodiscard]] std::string dnsmasq_config(std::span<const std::string> servers);

// The instance side, the same for containers and VMs: the NIC `eth0` gets a
// fixed address (subnet host 2, handed out by the bridge's DHCP) and
// security.mac_filtering + security.ipv4_filtering (no spoofed source
// leaves it); when `confined`, the config gets the proxy environment
// (`environment.*`, which Incus applies to init and every exec, through the
// VM agent as well) for http://GATEWAY:PROXY_PORT.
// A container also gets that address (and the default route) set by LXC
// before its init runs (`raw.lxc` lxc.net.0.ipv4.*), so the sandbox is on the
// network at once instead of after its DHCP client's lease; the lease then
// hands out the same address and the guest's DHCP client takes it over.
// `proxy` is where the proxy listens (the gateway, or the companion instance).
void confine_instance(std::map<std::string, std::string>& config, Json& devices, const Ipv4Net& subnet, bool confined,
                      const std::string& proxy, std::uint16_t proxy_port, Isolation isolation);

// The upstream resolvers dnsmasq forwards allowlisted names to:
// policy.dns.servers if any, else the `nameserver` lines of `resolv_conf`.
[[nodiscard]] std::vector<std::string> dns_upstreams(const policy::NetworkPolicy& policy,
                                                     const std::string& resolv_conf);

}  // namespace agentctl::provider::incus
