// Incus clusters: which member a sandbox is placed on, and the calls that
// make a sandbox's bridge in a cluster. Pure: the unit tests check them
// without a daemon. The contracts are Incus's own (doc/rest-api.yaml;
// doc/howto/network_create.md "Create a network in a cluster";
// cmd/incusd/networks.go networksPost).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agentctl/policy.hpp"
#include "provider/incus/client/client.hpp"

namespace agentctl::provider::incus {

struct ClusterMember {
    std::string name;    // server_name
    std::string url;     // https://ADDRESS:PORT (cluster.https_address)
    std::string status;  // Online, Offline, Evacuated, ...
};

// The members in GET /1.0/cluster/members?recursion=1.
[[nodiscard]] std::vector<ClusterMember> parse_cluster_members(const Json& metadata);

// The host in a member's url: "https://10.0.0.5:8443" -> "10.0.0.5",
// "https://[fd00::1]:8443" -> "fd00::1"; empty when it has none.
[[nodiscard]] std::string url_host(std::string_view url);

// Whether `member` is the machine agentctl runs on: the address in its url is
// a loopback address or one of `own_addresses`. A member named by a host name
// is never taken for this machine.
[[nodiscard]] bool is_this_machine(const ClusterMember& member, const std::vector<policy::IpAddress>& own_addresses);

// `path` with the query parameter target=MEMBER (percent-encoded): the member
// a POST /1.0/instances places the instance on, or the member a POST
// /1.0/networks defines a pending network on.
[[nodiscard]] std::string with_target(std::string_view path, std::string_view member);

struct PlacementRequest {
    bool clustered = false;              // GET /1.0: environment.server_clustered
    std::vector<ClusterMember> members;  // empty when not clustered
    std::string target;                  // --target; empty: Incus decides
    // This machine's addresses (policy::host_own_addresses()).
    std::vector<policy::IpAddress> own_addresses;
    // The sandbox's egress proxy and host firewall run on this machine (a
    // confined sandbox, incus.proxyPlacement=host): only a member that is this
    // machine can hold it.
    bool needs_this_machine = false;
};

// The member to give Incus as ?target= (empty: Incus places the sandbox).
// Throws agentctl::Error, before anything is made, for --target on a server
// that is not clustered, a member the cluster does not have (naming every
// member), and — when needs_this_machine — a member that is not this machine,
// or no --target in a cluster where Incus could choose another machine.
[[nodiscard]] std::string plan_placement(const PlacementRequest& request);

// The body of POST /1.0/networks?target=MEMBER that defines `network` (a
// network_payload body) as pending on one member: its name and type, and of
// its config only the member-specific keys (bridge.external_interfaces,
// parent, bgp.ipv4.nexthop, bgp.ipv6.nexthop); Incus refuses every other key
// and any description there. The global POST that follows carries the rest.
[[nodiscard]] Json pending_network_payload(const Json& network);

// Whether an Incus network config key may differ between members.
[[nodiscard]] bool is_member_specific_network_key(std::string_view key);

}  // namespace agentctl::provider::incus
