// The real resolver and interface listing behind agentctl/host_network.hpp.
#include "agentctl/host_network.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace agentctl::policy {
namespace {

void add_once(std::vector<IpAddress>& out, const IpAddress& address) {
    if (std::find(out.begin(), out.end(), address) == out.end()) out.push_back(address);
}

std::optional<int> prefix_length(const sockaddr* netmask) {
    auto mask = from_sockaddr(netmask);
    if (!mask) return std::nullopt;
    const std::size_t size = mask->v6 ? 16 : 4;
    int prefix = 0;
    for (std::size_t i = 0; i < size; ++i) {
        for (int bit = 7; bit >= 0; --bit) {
            if ((mask->bytes[i] & (1U << bit)) == 0) return prefix;
            ++prefix;
        }
    }
    return prefix;
}

class SystemResolver final : public Resolver {
public:
    std::vector<IpAddress> resolve(const std::string& host) override {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* result = nullptr;
        std::vector<IpAddress> out;
        if (::getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return out;
        for (auto* item = result; item != nullptr; item = item->ai_next) {
            if (auto address = from_sockaddr(item->ai_addr)) add_once(out, *address);
        }
        ::freeaddrinfo(result);
        return out;
    }
};

}  // namespace

std::unique_ptr<Resolver> make_system_resolver() { return std::make_unique<SystemResolver>(); }

std::optional<IpAddress> from_sockaddr(const sockaddr* address) {
    if (address == nullptr) return std::nullopt;
    IpAddress out;
    if (address->sa_family == AF_INET) {
        sockaddr_in v4{};
        std::memcpy(&v4, address, sizeof v4);
        std::memcpy(out.bytes.data(), &v4.sin_addr, 4);
        return out;
    }
    if (address->sa_family == AF_INET6) {
        sockaddr_in6 v6{};
        std::memcpy(&v6, address, sizeof v6);
        out.v6 = true;
        std::memcpy(out.bytes.data(), &v6.sin6_addr, 16);
        return out;
    }
    return std::nullopt;
}

std::vector<InterfaceAddress> interface_addresses() {
    std::vector<InterfaceAddress> out;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return out;
    for (auto* item = list; item != nullptr; item = item->ifa_next) {
        auto address = from_sockaddr(item->ifa_addr);
        if (!address) continue;
        out.push_back({item->ifa_name == nullptr ? std::string() : std::string(item->ifa_name), *address,
                       prefix_length(item->ifa_netmask)});
    }
    ::freeifaddrs(list);
    return out;
}

std::vector<IpAddress> host_own_addresses() {
    std::vector<IpAddress> out;
    for (const auto& entry : interface_addresses()) add_once(out, entry.address);
    return out;
}

}  // namespace agentctl::policy
