// agentctl's own nftables table for one sandbox bridge, on the host where the
// bridge lives.
//
// Incus's input chain accepts TCP/UDP 53, UDP 67 and UDP 547 from a bridge to
// every host address before the bridge's ACL is consulted, and an ACL cannot
// change that. This table closes the gap: a base chain on the input hook, at a
// priority before Incus's, rejects everything the sandbox sends to the host
// except DHCP and DNS to the sandbox's resolver and its egress proxy.
// (A reject in any base chain is final; an accept in Incus's chain is not.)
// New TCP connections the ACL would refuse get a TCP reset from this table
// (see FirewallSpec::direct).
// It also rejects IPv6 from the bridge, forwarding into other agentctl
// bridges (`agc-*`), and new connections that any sandbox's host processes'
// uid opens into this bridge (so no proxy reaches another sandbox, whatever its
// policy); the resolvers run as those uids too, and their DHCP answers (from port 67,
// which conntrack cannot pair with a broadcast request) are let out.
//
// One table per bridge, `inet agentctl-BRIDGE`, replaced as a whole (create
// then delete then define, in one nft transaction) so that applying it is
// idempotent; nothing else on the host is touched.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::provider::incus {

// An IP-literal destination the bridge ACL admits directly (TCP).
struct DirectDestination {
    std::string address;  // canonical text
    std::string ports;    // "80,443"; empty = any TCP port
};

struct FirewallSpec {
    std::string bridge;   // agc-...
    std::string gateway;  // the bridge's host address, e.g. 10.213.0.1
    std::uint16_t proxy_port = 0;
    // Every uid a sandbox's host process (proxy, resolver) may run as, as nft
    // writes a uid or a set (host_uid_set()).
    std::string proxy_uids = "65534";
    // What the bridge ACL admits besides the proxy: new TCP connections to
    // anything else are answered with a TCP reset here, at once. (The ACL's
    // own reject answers TCP with ICMP, which the kernel rate-limits: the
    // client then waits for its SYN retransmit, about a second.) Everything
    // admitted here still has to pass the ACL.
    std::vector<DirectDestination> direct;
    // Instance placement: the companion's address on the bridge, and the
    // sandbox's. The host then admits no proxy port of its own; the sandbox's
    // TCP to the companion's proxy port (and its answers) pass this table
    // where the bridge hands bridged traffic to the IP hooks (br_netfilter);
    // new TCP connections from the companion go on to the bridge ACL (which
    // lets it reach outside only).
    std::string proxy_instance;
    std::string sandbox;
    // False (network.dns.disabled): DNS to the gateway is refused like any
    // other host port; the resolver serves DHCP only.
    bool dns = true;
};

// `agentctl-BRIDGE`.
[[nodiscard]] std::string firewall_table(const std::string& bridge);

// The inet table of Incus's nftables firewall (Incus 6.0's name).
inline constexpr std::string_view k_incus_table = "incus";
// The chain of that table Incus makes of a bridge's ACLs: `acl.BRIDGE`, with
// the ACLs' rules and the bridge's default actions, which the bridge's input,
// output and forward chains (`aclin.`, `aclout.`, `aclfwd.BRIDGE`) jump to;
// Incus makes and removes the four together. There is no such chain when no
// ACL is attached (or with Incus's xtables firewall driver).
[[nodiscard]] std::string incus_acl_chain(const std::string& bridge);

// The `nft -f -` input that (re)defines the table.
[[nodiscard]] std::string firewall_script(const FirewallSpec& spec);

// The bridges whose agentctl table the host has, from `nft -j list tables`.
// Throws agentctl::Error when `nft_json` is not nft's JSON.
[[nodiscard]] std::vector<std::string> firewall_bridges(const std::string& nft_json);

// The `nft -f -` input that removes the table if it exists.
[[nodiscard]] std::string firewall_delete_script(const std::string& bridge);

}  // namespace agentctl::provider::incus
