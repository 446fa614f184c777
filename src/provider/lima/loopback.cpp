#include "provider/lima/loopback.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentctl/error.hpp"
#include "core/unique_fd.hpp"

namespace agentctl::provider::lima {
namespace {

sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

int tcp_socket() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

}  // namespace

bool loopback_port_free(std::uint16_t port) {
    core::UniqueFd fd(tcp_socket());
    if (fd.get() < 0) return false;
    // As a server binds: connections of an earlier listener in TIME_WAIT do not count.
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    auto addr = loopback(port);
    return ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

bool loopback_port_listening(std::uint16_t port) {
    core::UniqueFd fd(tcp_socket());
    if (fd.get() < 0) return false;
    auto addr = loopback(port);
    return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

std::uint16_t pick_loopback_port(const std::string& seed, const std::set<std::uint16_t>& taken) {
    constexpr unsigned k_span = static_cast<unsigned>(k_port_high) - k_port_low + 1;
    const unsigned start = static_cast<unsigned>(std::hash<std::string>{}(seed) % k_span);
    for (unsigned i = 0; i < k_span; ++i) {
        auto port = static_cast<std::uint16_t>(k_port_low + (start + i) % k_span);
        if (taken.count(port) == 0 && loopback_port_free(port)) return port;
    }
    throw Error("no free loopback port in 49152-65535", "stop some services or sandboxes and try again");
}

CanaryListener::CanaryListener() {
    m_fd = tcp_socket();
    if (m_fd < 0) throw Error(std::string("cannot open a loopback socket: ") + std::strerror(errno));
    auto addr = loopback(0);
    socklen_t len = sizeof addr;
    if (::bind(m_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(m_fd, 16) != 0 ||
        ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        int err = errno;
        ::close(m_fd);
        throw Error(std::string("cannot listen on the host loopback: ") + std::strerror(err));
    }
    ::fcntl(m_fd, F_SETFL, ::fcntl(m_fd, F_GETFL) | O_NONBLOCK);
    m_port = ntohs(addr.sin_port);
}

CanaryListener::~CanaryListener() {
    if (m_fd >= 0) ::close(m_fd);
}

bool CanaryListener::connected() {
    for (;;) {
        int client = ::accept(m_fd, nullptr, nullptr);
        if (client < 0) break;
        ::close(client);
        m_seen = true;
    }
    return m_seen;
}

}  // namespace agentctl::provider::lima
