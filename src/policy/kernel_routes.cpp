// make_kernel_route_table: where this machine's kernel sends a connection,
// asked at the moment the egress proxy is about to dial, and decide_dialled,
// which puts that answer after decide() (host_network.hpp).
//
// Linux asks rtnetlink directly, the same lookup `ip route get ADDRESS` makes:
// no snapshot of the host's addresses that an address added later (a new
// bridge, a DHCP lease, another sandbox's gateway) could be missing from.
// Measured at about 1.1 us per call for an address that goes out on the
// 2-core machines of docs/benchmarks.md, against 130-250 us of proxy CPU per
// connection.
#include "agentctl/host_network.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include "core/netlink_socket.hpp"

// The kernel's netlink macros (NLMSG_*, RTA_*, IFLA_RTA) step through char*
// and compare signed lengths with unsigned sizes. The buffers they walk are
// allocated (so aligned for any type) and the kernel pads every message and
// attribute to 4 bytes, so the casts are aligned; clang says otherwise.
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif

namespace agentctl::policy {
namespace {

// ::ffff:a.b.c.d is dialled as a.b.c.d (a v6 socket connects to it over v4).
IpAddress as_dialled(const IpAddress& address) {
    static constexpr std::array<std::uint8_t, 12> k_mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!address.v6 || !std::equal(k_mapped.begin(), k_mapped.end(), address.bytes.begin())) return address;
    IpAddress v4;
    std::copy_n(address.bytes.begin() + 12, 4, v4.bytes.begin());
    return v4;
}

#if defined(__linux__)

// How long a bridge's verdict (only veth and tap ports, or not) is kept: its
// ports come and go with instances, its index stays until it is deleted.
constexpr auto k_bridge_verdict_lifetime = std::chrono::seconds(1);

// An RTM_GETROUTE request after its header: the message and the destination.
struct RouteRequest {
    rtmsg message;
    rtattr destination;
    std::array<std::uint8_t, 16> address;
};
static_assert(offsetof(RouteRequest, destination) == NLMSG_ALIGN(sizeof(rtmsg)));
static_assert(offsetof(RouteRequest, address) == offsetof(RouteRequest, destination) + RTA_LENGTH(0));

template <typename Message>
std::string_view bytes_of(const Message& message, std::size_t size = sizeof(Message)) {
    return {reinterpret_cast<const char*>(&message), size};
}

class NetlinkRouteTable final : public RouteTable {
public:
    Route route_to(const IpAddress& wanted) override {
        Route route;
        route.kind = RouteKind::Unknown;
        const IpAddress address = as_dialled(wanted);
        const std::size_t size = address.v6 ? 16 : 4;
        RouteRequest request{};
        request.message.rtm_family = address.v6 ? AF_INET6 : AF_INET;
        request.message.rtm_dst_len = static_cast<unsigned char>(size * 8);
        request.destination.rta_type = RTA_DST;
        request.destination.rta_len = static_cast<unsigned short>(RTA_LENGTH(size));
        std::memcpy(request.address.data(), address.bytes.data(), size);
        // The route's type and the link it leaves by, from the kernel's one reply.
        std::optional<unsigned char> type;
        int oif = 0;
        const auto read_route = [&](const nlmsghdr& header, std::string_view) {
            if (header.nlmsg_type != RTM_NEWROUTE) return;
            type = static_cast<const rtmsg*>(NLMSG_DATA(&header))->rtm_type;
            oif = output_interface(header);
        };
        const auto payload = bytes_of(request, offsetof(RouteRequest, address) + size);
        const auto outcome = m_socket.exchange(RTM_GETROUTE, 0, payload, read_route);
        if (!outcome.complete) return route;
        if (outcome.error != 0) {
            // No route (unreachable, prohibited, blackhole): nothing on this
            // machine answers it; the connect fails on its own.
            route.kind = RouteKind::Away;
            return route;
        }
        if (!type) return route;
        switch (*type) {
            case RTN_LOCAL:
            case RTN_ANYCAST:
            case RTN_BROADCAST:
            case RTN_MULTICAST: route.kind = RouteKind::HostLocal; break;
            default: route.kind = oif > 0 && sandbox_bridge(oif) ? RouteKind::SandboxNetwork : RouteKind::Away;
        }
        // The name is for the refusal's sentence only: not asked for on the way out.
        char name[IF_NAMESIZE] = {};
        if (route.kind != RouteKind::Away && oif > 0 && ::if_indextoname(static_cast<unsigned>(oif), name) != nullptr)
            route.interface = name;
        return route;
    }

private:
    struct BridgeVerdict {
        bool sandboxes_only = false;
        std::chrono::steady_clock::time_point until;
    };

    // The link a route (RTM_NEWROUTE) leaves by, 0 when it names none.
    static int output_interface(const nlmsghdr& header) {
        int oif = 0;
        int length = static_cast<int>(header.nlmsg_len) - static_cast<int>(NLMSG_LENGTH(sizeof(rtmsg)));
        for (const rtattr* attribute = RTM_RTA(NLMSG_DATA(&header)); RTA_OK(attribute, length);
             attribute = RTA_NEXT(attribute, length)) {
            if (attribute->rta_type == RTA_OIF) std::memcpy(&oif, RTA_DATA(attribute), sizeof oif);
        }
        return oif;
    }

    // Whether link `index` is a bridge and every port on it is a veth or a
    // tap (containers and VMs of this machine; an uplink bridge has a NIC,
    // bond or VLAN among its ports). A link that is no bridge is remembered
    // for good: a link's kind never changes under its index.
    bool sandbox_bridge(int index) {
        const auto now = std::chrono::steady_clock::now();
        if (auto known = m_bridges.find(index); known != m_bridges.end() && known->second.until > now) {
            return known->second.sandboxes_only;
        }
        BridgeVerdict verdict;
        verdict.sandboxes_only = list_links(index);
        verdict.until = now + k_bridge_verdict_lifetime;
        if (!m_is_bridge) verdict.until = std::chrono::steady_clock::time_point::max();
        m_bridges[index] = verdict;
        return verdict.sandboxes_only;
    }

    // Dumps the links once: sets m_is_bridge for `index`, and returns true
    // when it is a bridge whose ports are all veth or tap.
    bool list_links(int index) {
        m_is_bridge = false;
        ifinfomsg request{};
        request.ifi_family = AF_UNSPEC;
        bool ports_virtual = true;
        const auto read_link = [&](const nlmsghdr& header, std::string_view) {
            if (header.nlmsg_type != RTM_NEWLINK) return;
            const auto* link = static_cast<const ifinfomsg*>(NLMSG_DATA(&header));
            auto [master, kind] = master_and_kind(&header);
            if (link->ifi_index == index && kind == "bridge") m_is_bridge = true;
            if (master == index && kind != "veth" && kind != "tun") ports_virtual = false;
        };
        const auto outcome = m_socket.exchange(RTM_GETLINK, NLM_F_DUMP, bytes_of(request), read_link);
        return outcome.complete && m_is_bridge && ports_virtual;
    }

    static std::pair<int, std::string> master_and_kind(const nlmsghdr* header) {
        int master = 0;
        std::string kind;
        const auto* link = static_cast<const ifinfomsg*>(NLMSG_DATA(header));
        int length = static_cast<int>(header->nlmsg_len) - static_cast<int>(NLMSG_LENGTH(sizeof(ifinfomsg)));
        for (const rtattr* attribute = IFLA_RTA(link); RTA_OK(attribute, length);
             attribute = RTA_NEXT(attribute, length)) {
            if (attribute->rta_type == IFLA_MASTER) std::memcpy(&master, RTA_DATA(attribute), sizeof master);
            if (attribute->rta_type != IFLA_LINKINFO) continue;
            int info_length = static_cast<int>(RTA_PAYLOAD(attribute));
            for (const auto* info = static_cast<const rtattr*>(RTA_DATA(attribute)); RTA_OK(info, info_length);
                 info = RTA_NEXT(info, info_length)) {
                if (info->rta_type == IFLA_INFO_KIND) kind = static_cast<const char*>(RTA_DATA(info));
            }
        }
        return {master, kind};
    }

    // No receive timeout: rtnetlink answers while the request is sent (a
    // dump's later replies while the earlier ones are read), so a receive
    // never waits.
    core::NetlinkSocket m_socket{NETLINK_ROUTE};
    bool m_is_bridge = false;
    std::unordered_map<int, BridgeVerdict> m_bridges;
};

#else

// No rtnetlink: an address this machine has can be bound, any other cannot.
class BindRouteTable final : public RouteTable {
public:
    Route route_to(const IpAddress& wanted) override {
        const IpAddress address = as_dialled(wanted);
        Route route;
        const int fd = ::socket(address.v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
        if (fd < 0) {
            route.kind = RouteKind::Unknown;
            return route;
        }
        int result = -1;
        if (address.v6) {
            sockaddr_in6 local{};
            local.sin6_family = AF_INET6;
            std::memcpy(&local.sin6_addr, address.bytes.data(), 16);
            result = ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local);
        } else {
            sockaddr_in local{};
            local.sin_family = AF_INET;
            std::memcpy(&local.sin_addr, address.bytes.data(), 4);
            result = ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local);
        }
        ::close(fd);
        route.kind = result == 0 ? RouteKind::HostLocal : RouteKind::Away;
        return route;
    }
};

#endif

}  // namespace

Decision decide_dialled(const NetworkPolicy& policy, std::string_view host, std::uint16_t port,
                        std::vector<IpAddress> addresses, std::span<const IpAddress> host_own_addresses,
                        RouteTable& routes) {
    std::optional<Decision> route_refusal;
    for (;;) {
        auto decision = decide(policy, host, port, addresses, host_own_addresses);
        if (!decision.allowed || !decision.address) return route_refusal ? std::move(*route_refusal) : decision;
        auto refused = vet_route(*decision.address, routes.route_to(*decision.address));
        if (!refused) return decision;
        if (!route_refusal) route_refusal = std::move(refused);
        std::erase(addresses, *decision.address);
        if (addresses.empty()) return std::move(*route_refusal);
    }
}

std::unique_ptr<RouteTable> make_kernel_route_table() {
#if defined(__linux__)
    return std::make_unique<NetlinkRouteTable>();
#else
    return std::make_unique<BindRouteTable>();
#endif
}

}  // namespace agentctl::policy
