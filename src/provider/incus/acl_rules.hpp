// Turning a sandbox's NetworkPolicy into the egress rules of its Incus network
// ACL. Incus ACLs match addresses, not names, so each allowed name is resolved
// when the policy is applied (resolve_allow_names) and the pure builder
// (build_acl_rules) turns names + addresses into rules.
//
// Rules, all `action: allow`, `state: enabled` (the ACL's default egress
// action on the bridge is reject, so everything else is refused):
//   DNS      udp+tcp 53 to any server, or to each configured server; none when disabled
//   allow-LAN  every private/link-local/CGNAT range, v4 and v6, any protocol
//   allow    one rule per resolved address of each allowed name (or each IP
//            rule), tcp, its ports (none listed = any TCP port)
// Under deny-LAN an address that policy::classify() calls anything but Public
// is dropped (and reported); loopback, multicast, broadcast, unspecified and
// reserved addresses are dropped always. `*.domain` rules cannot be expressed
// as addresses and are reported, never widened to the apex.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agentctl/policy.hpp"
#include "provider/incus/client.hpp"

namespace agentctl::provider::incus {

// Name resolution behind a seam: the real one uses getaddrinfo.
class Resolver {
public:
    virtual ~Resolver() = default;
    // Every address `host` resolves to (A and AAAA); empty when it does not
    // resolve. Never throws for a lookup failure.
    virtual std::vector<policy::IpAddress> resolve(const std::string& host) = 0;
};
[[nodiscard]] std::unique_ptr<Resolver> make_system_resolver();

using ResolvedNames = std::map<std::string, std::vector<policy::IpAddress>>;

// Resolves every Name rule of `policy` (each name once).
[[nodiscard]] ResolvedNames resolve_allow_names(const policy::NetworkPolicy& policy, Resolver& resolver);

struct AclRules {
    Json egress = Json::array();
    // One sentence per thing that could not become a rule (dropped LAN address,
    // wildcard, name that did not resolve), for a warning line.
    std::vector<std::string> notes;
};

// The pure builder. Rules are de-duplicated (same destination, protocol, ports).
[[nodiscard]] AclRules build_acl_rules(const policy::NetworkPolicy& policy, const ResolvedNames& resolved);

// The ACL object for POST /1.0/network-acls (or PUT without `name`).
[[nodiscard]] Json acl_payload(const std::string& sandbox, const AclRules& rules);

// The ranges --allow-lan opens, v4 then v6.
[[nodiscard]] const std::vector<std::string>& lan_ranges();

}  // namespace agentctl::provider::incus
