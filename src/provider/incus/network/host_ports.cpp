#include "provider/incus/network/host_ports.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::provider::incus {

void check_host_port_free(const PortForward& port) {
    const bool v6 = port.listen_address.find(':') != std::string::npos;
    const int fd = ::socket(v6 ? AF_INET6 : AF_INET, port.protocol == "udp" ? SOCK_DGRAM : SOCK_STREAM, 0);
    if (fd < 0) return;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = -1;
    if (v6) {
        sockaddr_in6 addr{};
        addr.sin6_family = AF_INET6;
        addr.sin6_port = htons(port.host_port);
        if (::inet_pton(AF_INET6, port.listen_address.c_str(), &addr.sin6_addr) == 1) {
            rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        }
    } else {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port.host_port);
        if (::inet_pton(AF_INET, port.listen_address.c_str(), &addr.sin_addr) == 1) {
            rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        }
    }
    const int err = errno;
    ::close(fd);
    if (rc != 0) {
        throw Error(fmt::format("cannot publish {}:{}/{}: {}", port.listen_address, port.host_port, port.protocol,
                                err == EADDRINUSE ? "the port is already in use on this host" : std::strerror(err)),
                    "pick a free host port: --port HOST:GUEST");
    }
}

std::vector<std::unique_ptr<core::FileLock>> reserve_host_ports(
    const std::string& lock_dir, const std::vector<PortForward>& ports,
    const std::function<void(const PortForward&)>& on_wait) {
    auto ordered = ports;
    const auto key = [](const PortForward& p) { return std::tie(p.protocol, p.host_port); };
    std::sort(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
    ordered.erase(
        std::unique(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) { return key(a) == key(b); }),
        ordered.end());
    std::vector<std::unique_ptr<core::FileLock>> locks;
    for (const auto& port : ordered) {
        locks.push_back(std::make_unique<core::FileLock>(
            fmt::format("{}/agentctl-incus-port-{}-{}.lock", lock_dir, port.protocol, port.host_port),
            [&] { on_wait(port); }));
    }
    return locks;
}

}  // namespace agentctl::provider::incus
