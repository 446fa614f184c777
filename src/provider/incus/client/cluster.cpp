#include "provider/incus/client/cluster.hpp"
#include "provider/incus/client/server.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::provider::incus {

std::vector<ClusterMember> parse_cluster_members(const Json& metadata) {
    std::vector<ClusterMember> members;
    if (!metadata.is_array()) return members;
    for (const auto& entry : metadata) {
        if (!entry.is_object()) continue;
        members.push_back(ClusterMember{entry.value("server_name", std::string()), entry.value("url", std::string()),
                                        entry.value("status", std::string())});
    }
    return members;
}

std::string url_host(std::string_view url) {
    if (auto scheme = url.find("://"); scheme != std::string_view::npos) url.remove_prefix(scheme + 3);
    url = url.substr(0, url.find_first_of("/?#"));
    if (auto at = url.rfind('@'); at != std::string_view::npos) url.remove_prefix(at + 1);
    if (url.starts_with('[')) {
        const auto close = url.find(']');
        return close == std::string_view::npos ? std::string() : std::string(url.substr(1, close - 1));
    }
    return std::string(url.substr(0, url.find(':')));
}

bool is_this_machine(const ClusterMember& member, const std::vector<policy::IpAddress>& own_addresses) {
    const auto host = url_host(member.url);
    const auto address = policy::parse_ip_literal(host);
    return address && is_this_machine(*address, own_addresses);
}

std::string with_target(std::string_view path, std::string_view member) {
    std::string target(path);
    target += path.find('?') == std::string_view::npos ? '?' : '&';
    target += "target=";
    for (const unsigned char c : member) {
        const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                                c == '-' || c == '.' || c == '_' || c == '~';
        target += unreserved ? std::string(1, static_cast<char>(c)) : fmt::format("%{:02X}", c);
    }
    return target;
}

namespace {

std::string member_names(const std::vector<ClusterMember>& members) {
    std::string names;
    for (const auto& member : members) names += (names.empty() ? "" : ", ") + member.name;
    return names.empty() ? std::string("none") : names;
}

// Members that are this machine, by name.
std::vector<std::string> local_members(const PlacementRequest& request) {
    std::vector<std::string> names;
    for (const auto& member : request.members) {
        if (is_this_machine(member, request.own_addresses)) names.push_back(member.name);
    }
    return names;
}

constexpr std::string_view k_proxy_reason =
    "the sandbox's egress proxy and firewall run on this machine, and its bridge exists on each member separately: "
    "on another member the sandbox would have no way out that agentctl enforces";

}  // namespace

std::string plan_placement(const PlacementRequest& request) {
    if (!request.clustered) {
        if (request.target.empty()) return {};
        throw Error(fmt::format("--target {}: the Incus server is not a cluster, so there is no member to place the "
                                "sandbox on",
                                request.target),
                    "leave out --target (the sandbox runs on this server), or use a clustered server "
                    "(`incus cluster list` shows the members)");
    }
    const auto local = local_members(request);
    if (request.target.empty()) {
        if (!request.needs_this_machine) return {};
        const bool only_here = std::all_of(request.members.begin(), request.members.end(), [&](const auto& member) {
            return std::find(local.begin(), local.end(), member.name) != local.end();
        });
        if (only_here) return {};  // whatever Incus picks is this machine
        throw Error(fmt::format("Incus could place the sandbox on any cluster member ({}), but {}",
                                member_names(request.members), k_proxy_reason),
                    local.empty() ? std::string("no member is this machine: run agentctl on a cluster member")
                                  : fmt::format("place it on this machine: --target {}", local.front()));
    }
    const auto it = std::find_if(request.members.begin(), request.members.end(),
                                 [&](const auto& member) { return member.name == request.target; });
    if (it == request.members.end()) {
        throw Error(fmt::format("--target {}: the cluster has no such member (its members: {})", request.target,
                                member_names(request.members)),
                    "`incus cluster list` shows the members");
    }
    if (request.needs_this_machine && std::find(local.begin(), local.end(), it->name) == local.end()) {
        throw Error(
            fmt::format("--target {}: that member ({}) is not this machine, and {}", it->name, it->url, k_proxy_reason),
            local.empty() ? std::string("run agentctl on that member, or create the sandbox with "
                                        "--no-network-policy if it needs no egress policy")
                          : fmt::format("place it on this machine (--target {}), or run agentctl on {}", local.front(),
                                        it->name));
    }
    return it->name;
}

bool is_member_specific_network_key(std::string_view key) {
    static constexpr std::array<std::string_view, 4> k_keys{"bgp.ipv4.nexthop", "bgp.ipv6.nexthop",
                                                            "bridge.external_interfaces", "parent"};
    if (std::find(k_keys.begin(), k_keys.end(), key) != k_keys.end()) return true;
    // tunnel.NAME.interface and tunnel.NAME.local
    if (!key.starts_with("tunnel.")) return false;
    const auto rest = key.substr(7);
    const auto dot = rest.find('.');
    if (dot == 0 || dot == std::string_view::npos) return false;
    const auto field = rest.substr(dot + 1);
    return field == "interface" || field == "local";
}

Json pending_network_payload(const Json& network) {
    Json config = Json::object();
    const auto given = network.value("config", Json::object());
    for (const auto& [key, value] : given.items()) {
        if (is_member_specific_network_key(key)) config[key] = value;
    }
    return Json{{"name", network.value("name", "")}, {"type", network.value("type", "bridge")}, {"config", config}};
}

}  // namespace agentctl::provider::incus
