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
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

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

class NetlinkRouteTable final : public RouteTable {
public:
    NetlinkRouteTable() {
        m_fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (m_fd < 0) return;
        sockaddr_nl local{};
        local.nl_family = AF_NETLINK;
        if (::bind(m_fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
            ::close(m_fd);
            m_fd = -1;
        }
    }
    ~NetlinkRouteTable() override {
        if (m_fd >= 0) ::close(m_fd);
    }
    NetlinkRouteTable(const NetlinkRouteTable&) = delete;
    NetlinkRouteTable& operator=(const NetlinkRouteTable&) = delete;

    Route route_to(const IpAddress& wanted) override {
        Route route;
        route.kind = RouteKind::Unknown;
        if (m_fd < 0) return route;
        const IpAddress address = as_dialled(wanted);
        struct {
            nlmsghdr header;
            rtmsg message;
            std::array<char, 64> attributes;
        } request{};
        const std::size_t size = address.v6 ? 16 : 4;
        request.header.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
        request.header.nlmsg_type = RTM_GETROUTE;
        request.header.nlmsg_flags = NLM_F_REQUEST;
        request.header.nlmsg_seq = ++m_sequence;
        request.message.rtm_family = address.v6 ? AF_INET6 : AF_INET;
        request.message.rtm_dst_len = static_cast<unsigned char>(size * 8);
        auto* destination =
            reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&request) + NLMSG_ALIGN(NLMSG_LENGTH(sizeof(rtmsg))));
        destination->rta_type = RTA_DST;
        destination->rta_len = static_cast<unsigned short>(RTA_LENGTH(size));
        std::memcpy(RTA_DATA(destination), address.bytes.data(), size);
        request.header.nlmsg_len = NLMSG_ALIGN(request.header.nlmsg_len) + RTA_ALIGN(destination->rta_len);
        if (!exchange(&request, request.header.nlmsg_len)) return route;
        const auto* header = reinterpret_cast<const nlmsghdr*>(m_reply.data());
        if (header->nlmsg_type == NLMSG_ERROR) {
            // No route (unreachable, prohibited, blackhole): nothing on this
            // machine answers it; the connect fails on its own.
            route.kind = RouteKind::Away;
            return route;
        }
        if (header->nlmsg_type != RTM_NEWROUTE) return route;
        const auto* message = static_cast<const rtmsg*>(NLMSG_DATA(header));
        int oif = 0;
        int length = static_cast<int>(header->nlmsg_len) - static_cast<int>(NLMSG_LENGTH(sizeof(rtmsg)));
        for (const rtattr* attribute = RTM_RTA(message); RTA_OK(attribute, length);
             attribute = RTA_NEXT(attribute, length)) {
            if (attribute->rta_type == RTA_OIF) std::memcpy(&oif, RTA_DATA(attribute), sizeof oif);
        }
        switch (message->rtm_type) {
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

    // Sends one request and reads the first reply of the same sequence
    // number into m_reply (the kernel has queued it before sendto returns);
    // false on any failure.
    bool exchange(const void* request, std::size_t length) {
        sockaddr_nl kernel{};
        kernel.nl_family = AF_NETLINK;
        if (::sendto(m_fd, request, length, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) return false;
        for (;;) {
            const ssize_t n = ::recv(m_fd, m_reply.data(), m_reply.size(), 0);
            if (n < static_cast<ssize_t>(sizeof(nlmsghdr))) return false;
            const auto* header = reinterpret_cast<const nlmsghdr*>(m_reply.data());
            if (header->nlmsg_seq == m_sequence && header->nlmsg_len <= static_cast<std::uint32_t>(n)) return true;
        }
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
        struct {
            nlmsghdr header;
            ifinfomsg message;
        } request{};
        request.header.nlmsg_len = NLMSG_LENGTH(sizeof(ifinfomsg));
        request.header.nlmsg_type = RTM_GETLINK;
        request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        request.header.nlmsg_seq = ++m_sequence;
        request.message.ifi_family = AF_UNSPEC;
        sockaddr_nl kernel{};
        kernel.nl_family = AF_NETLINK;
        if (::sendto(m_fd, &request, request.header.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) <
            0) {
            return false;
        }
        bool ports_virtual = true;
        std::vector<char> buffer(32768);
        for (bool done = false; !done;) {
            const ssize_t n = ::recv(m_fd, buffer.data(), buffer.size(), 0);
            if (n <= 0) return false;
            int left = static_cast<int>(n);
            for (auto* header = reinterpret_cast<nlmsghdr*>(buffer.data()); NLMSG_OK(header, left);
                 header = NLMSG_NEXT(header, left)) {
                if (header->nlmsg_seq != m_sequence) continue;
                if (header->nlmsg_type == NLMSG_DONE || header->nlmsg_type == NLMSG_ERROR) {
                    done = true;
                    break;
                }
                if (header->nlmsg_type != RTM_NEWLINK) continue;
                const auto* link = static_cast<const ifinfomsg*>(NLMSG_DATA(header));
                auto [master, kind] = master_and_kind(header);
                if (link->ifi_index == index && kind == "bridge") m_is_bridge = true;
                if (master == index && kind != "veth" && kind != "tun") ports_virtual = false;
            }
        }
        return m_is_bridge && ports_virtual;
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

    int m_fd = -1;
    std::uint32_t m_sequence = 0;
    alignas(nlmsghdr) std::array<char, 8192> m_reply{};
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
