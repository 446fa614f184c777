// A child process in a network namespace of its own, with loopback up and,
// given a port, a listener on 127.0.0.1:PORT; it waits to be killed. It
// stands for a container's namespace, and keeps what a test does there off
// the host's. Making one needs root (unshare).
#pragma once

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>

namespace agentctl::test {

class NamespaceChild {
public:
    explicit NamespaceChild(std::uint16_t listen_port = 0) {
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        m_pid = ::fork();
        REQUIRE(m_pid >= 0);
        if (m_pid == 0) {
            const char ok = ::unshare(CLONE_NEWNET) == 0 && loopback_up() && listen_on(listen_port) ? 1 : 0;
            (void)!::write(ready[1], &ok, 1);
            for (;;) ::pause();
        }
        ::close(ready[1]);
        char ok = 0;
        REQUIRE(::read(ready[0], &ok, 1) == 1);
        ::close(ready[0]);
        REQUIRE(ok == 1);
    }
    ~NamespaceChild() {
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, nullptr, 0);
    }
    NamespaceChild(const NamespaceChild&) = delete;
    NamespaceChild& operator=(const NamespaceChild&) = delete;

    [[nodiscard]] int pid() const { return m_pid; }
    // `/proc/PID/ns/net`: for setns(2) and `nsenter --net=`.
    [[nodiscard]] std::string path() const { return "/proc/" + std::to_string(m_pid) + "/ns/net"; }

private:
    static bool loopback_up() {
        const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
        ifreq ifr{};
        std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
        ifr.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
        return s >= 0 && ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
    }
    static bool listen_on(std::uint16_t port) {
        if (port == 0) return true;
        const int l = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return l >= 0 && ::bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(l, 8) == 0;
    }

    int m_pid = -1;
};

}  // namespace agentctl::test
