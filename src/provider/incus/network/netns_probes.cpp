#include "provider/incus/network/netns_probes.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/unique_fd.hpp"

namespace agentctl::provider::incus {
namespace {

using Clock = std::chrono::steady_clock;
using common::ProbeResult;
using common::ProbeVerdict;

constexpr std::string_view k_denied_name = "agentctl-probe.invalid";
// How long the proxy and the resolver may still be coming up.
constexpr auto k_coming_up = std::chrono::seconds(3);
constexpr auto k_retry_pause = std::chrono::milliseconds(200);

// A non-blocking IPv4 socket of `type`, in the calling thread's network namespace.
class Socket {
public:
    explicit Socket(int type) : m_fd(::socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) {}
    [[nodiscard]] int fd() const { return m_fd.get(); }

private:
    core::UniqueFd m_fd;
};

// What one attempt came to: connected/answered, refused with an error, or no
// answer before the deadline.
enum class Outcome { Done, Refused, Timeout };

struct Attempt {
    Outcome outcome = Outcome::Timeout;
    int error = 0;      // Refused: the errno
    std::string reply;  // Done: what came back (a status line, a DNS answer)
};

int remaining_ms(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_for(int fd, short events, Clock::time_point deadline) {
    pollfd p{fd, events, 0};
    for (;;) {
        const int n = ::poll(&p, 1, remaining_ms(deadline));
        if (n > 0) return true;
        if (n == 0 || errno != EINTR) return false;
    }
}

bool to_address(const std::string& host, std::uint16_t port, sockaddr_in& addr) {
    addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    return ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1;
}

// A TCP connection to host:port; with `request`, sends it and reads the first line back.
Attempt tcp_attempt(const Socket& s, const std::string& host, std::uint16_t port, const std::string& request,
                    Clock::time_point deadline) {
    sockaddr_in addr{};
    if (s.fd() < 0 || !to_address(host, port, addr)) return {Outcome::Refused, s.fd() < 0 ? errno : EINVAL, {}};
    if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
        return {Outcome::Refused, errno, {}};
    }
    if (!wait_for(s.fd(), POLLOUT, deadline)) return {};
    int error = 0;
    socklen_t len = sizeof error;
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) return {Outcome::Refused, error, {}};
    if (request.empty()) return {Outcome::Done, 0, {}};
    if (::send(s.fd(), request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
        return {Outcome::Refused, errno, {}};
    }
    std::string line;
    char c = 0;
    while (line.size() < 256 && wait_for(s.fd(), POLLIN, deadline)) {
        const auto n = ::recv(s.fd(), &c, 1, 0);
        if (n <= 0 || c == '\n') break;
        if (c != '\r') line += c;
    }
    return {Outcome::Done, 0, line};
}

// A DNS query (A, recursion desired) for `name`.
std::string dns_query(std::string_view name) {
    std::string q("\x41\x47\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);
    std::size_t start = 0;
    while (start <= name.size()) {
        auto dot = name.find('.', start);
        if (dot == std::string_view::npos) dot = name.size();
        q += static_cast<char>(dot - start);
        q += name.substr(start, dot - start);
        start = dot + 1;
    }
    q += std::string("\x00\x00\x01\x00\x01", 5);
    return q;
}

// The script's words for a DNS attempt: refused | timeout | answer RCODE COUNT | error TEXT.
std::string dns_attempt(const std::string& host, std::string_view name, Clock::time_point deadline) {
    Socket s(SOCK_DGRAM);
    sockaddr_in addr{};
    if (s.fd() < 0 || !to_address(host, 53, addr)) return "error " + std::string(std::strerror(errno));
    const auto q = dns_query(name);
    if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::send(s.fd(), q.data(), q.size(), 0) < 0) {
        return errno == ECONNREFUSED ? "refused" : "error " + std::string(std::strerror(errno));
    }
    if (!wait_for(s.fd(), POLLIN, deadline)) return "timeout";
    unsigned char r[512];
    const auto n = ::recv(s.fd(), r, sizeof r, 0);
    if (n < 0) return errno == ECONNREFUSED ? "refused" : "error " + std::string(std::strerror(errno));
    if (n < 8) return "error a reply too short for DNS";
    return fmt::format("answer {} {}", r[3] & 15, (r[6] << 8) | r[7]);
}

std::string seconds(std::chrono::milliseconds t) { return fmt::format("{:g}", static_cast<double>(t.count()) / 1000); }

ProbeResult tcp_probe(const std::string& name, const std::string& host, std::uint16_t port, const std::string& what,
                      std::chrono::milliseconds timeout) {
    const Socket s(SOCK_STREAM);
    const auto a = tcp_attempt(s, host, port, {}, Clock::now() + timeout);
    switch (a.outcome) {
        case Outcome::Done: return {name, ProbeVerdict::Escaped, what + " connected"};
        case Outcome::Refused:
            return {name, ProbeVerdict::Held, fmt::format("{} was rejected ({})", what, std::strerror(a.error))};
        case Outcome::Timeout: break;
    }
    return {name, ProbeVerdict::Inconclusive,
            fmt::format("{} got no answer within {} s (dropped, not rejected)", what, seconds(timeout))};
}

ProbeResult proxy_probe(const ProbeTargets& t, std::chrono::milliseconds timeout) {
    const auto proxy = t.proxy.empty() ? t.gateway : t.proxy;
    const auto what = fmt::format("CONNECT {}:443 through the proxy {}:{}", k_denied_name, proxy, t.proxy_port);
    const auto request = fmt::format("CONNECT {0}:443 HTTP/1.1\r\nHost: {0}:443\r\n\r\n", k_denied_name);
    const auto give_up = Clock::now() + k_coming_up;
    Attempt a;
    for (;;) {
        const Socket s(SOCK_STREAM);
        a = tcp_attempt(s, proxy, t.proxy_port, request, Clock::now() + timeout);
        if (!(a.outcome == Outcome::Refused || (a.outcome == Outcome::Done && a.reply.empty())) ||
            Clock::now() >= give_up) {
            break;
        }
        std::this_thread::sleep_for(k_retry_pause);
    }
    const auto& line = a.reply;
    const auto code = line.size() >= 12 && line.starts_with("HTTP/1.") ? line.substr(9, 3) : std::string();
    if (a.outcome != Outcome::Done || line.empty()) {
        return {"proxy-denied-name", ProbeVerdict::Inconclusive, what + ": the proxy did not answer (is it running?)"};
    }
    if (code == "403") return {"proxy-denied-name", ProbeVerdict::Held, fmt::format("{} was refused ({})", what, line)};
    if (code.starts_with('4') || code.starts_with('5')) {
        return {"proxy-denied-name", ProbeVerdict::Held, fmt::format("{} got no tunnel ({})", what, line)};
    }
    if (code.starts_with('2')) {
        return {"proxy-denied-name", ProbeVerdict::Escaped, fmt::format("{} was accepted ({})", what, line)};
    }
    return {"proxy-denied-name", ProbeVerdict::Inconclusive, fmt::format("{} answered {}", what, line)};
}

ProbeResult dns_elsewhere_probe(const ProbeTargets& t, std::chrono::milliseconds timeout) {
    const auto what = fmt::format("a UDP DNS query to {}:53 (not the sandbox's resolver)", t.unrouted);
    const auto r = dns_attempt(t.unrouted, k_denied_name, Clock::now() + timeout);
    if (r == "refused" || r.starts_with("error")) {
        return {"dns-udp-elsewhere", ProbeVerdict::Held, fmt::format("{} was rejected ({})", what, r)};
    }
    if (r.starts_with("answer")) return {"dns-udp-elsewhere", ProbeVerdict::Escaped, what + " was answered"};
    return {"dns-udp-elsewhere", ProbeVerdict::Inconclusive,
            fmt::format("{} got no answer within {} s (dropped, not rejected)", what, seconds(timeout))};
}

ProbeResult dns_denied_probe(const ProbeTargets& t, std::chrono::milliseconds timeout) {
    const auto what = fmt::format("the bridge's resolver {} for {}", t.gateway, k_denied_name);
    // Right after create the resolver may still be starting: a refusal means "not up yet".
    const auto give_up = Clock::now() + (t.dns_closed ? std::chrono::seconds(0) : k_coming_up);
    auto r = dns_attempt(t.gateway, k_denied_name, Clock::now() + timeout);
    while ((r == "refused" || r.starts_with("error")) && Clock::now() < give_up) {
        std::this_thread::sleep_for(k_retry_pause);
        r = dns_attempt(t.gateway, k_denied_name, Clock::now() + timeout);
    }
    if (t.dns_closed) {
        if (r == "refused" || r.starts_with("error")) {
            return {"dns-denied-name", ProbeVerdict::Held,
                    fmt::format("{} was refused (network.dns.disabled) ({})", what, r)};
        }
        if (r.starts_with("answer")) {
            return {"dns-denied-name", ProbeVerdict::Inconclusive,
                    fmt::format("{} answered though network.dns.disabled closes it ({})", what, r)};
        }
    }
    if (r.starts_with("answer 3 ") || r.starts_with("answer 5 ") || r == "answer 0 0") {
        return {"dns-denied-name", ProbeVerdict::Held, fmt::format("{} answered no address ({})", what, r)};
    }
    if (r.starts_with("answer")) {
        return {"dns-denied-name", ProbeVerdict::Escaped, fmt::format("{} resolved it ({})", what, r)};
    }
    return {"dns-denied-name", ProbeVerdict::Inconclusive, fmt::format("{}: {}", what, r)};
}

}  // namespace

NetnsHandle::NetnsHandle(int pid)
    : m_fd(pid > 0 ? ::open(fmt::format("/proc/{}/ns/net", pid).c_str(), O_RDONLY | O_CLOEXEC) : -1) {
    struct stat theirs {};
    struct stat ours {};
    if (m_fd.get() < 0 || ::fstat(m_fd.get(), &theirs) != 0) {
        const int error = errno;
        throw Error(fmt::format("cannot open the sandbox's network namespace /proc/{}/ns/net: {}", pid,
                                pid > 0 ? std::strerror(error) : "no init process"));
    }
    if (::stat("/proc/self/ns/net", &ours) == 0 && ours.st_dev == theirs.st_dev && ours.st_ino == theirs.st_ino) {
        throw Error(fmt::format("process {} runs in this host's own network namespace, not a sandbox's", pid));
    }
}

std::vector<ProbeResult> probe_in_namespace(const NetnsHandle& netns, const ProbeTargets& t,
                                            std::chrono::milliseconds timeout) {
    using Probe = std::function<ProbeResult()>;
    std::vector<Probe> probes;
    probes.emplace_back([&] {
        return tcp_probe("direct-bypass", t.unrouted, 443,
                         fmt::format("a direct TCP connection to {}:443 (no proxy)", t.unrouted), timeout);
    });
    probes.emplace_back([&]() -> ProbeResult {
        if (t.gateway_canary == 0) {
            return {"host-port", ProbeVerdict::Skipped,
                    fmt::format("the Incus server is not this machine: no listener of agentctl's on {}", t.gateway)};
        }
        return tcp_probe("host-port", t.gateway, t.gateway_canary,
                         fmt::format("TCP to the host at {}:{}", t.gateway, t.gateway_canary), timeout);
    });
    for (const auto& named : {std::pair<std::string, int>{"host-address", -1}, {"dns-tcp-elsewhere", 53}}) {
        probes.emplace_back([&t, timeout, name = named.first, port = named.second]() -> ProbeResult {
            if (t.other_host_address.empty()) {
                if (t.gateway_canary == 0) {
                    return {name, ProbeVerdict::Skipped,
                            "the Incus server is not this machine: no listener of agentctl's there"};
                }
                return {name, ProbeVerdict::Held, "the host has no other address to try"};
            }
            const auto p = port < 0 ? t.other_canary : static_cast<std::uint16_t>(port);
            const auto what = port < 0 ? fmt::format("TCP to the host's other address {}:{}", t.other_host_address, p)
                                       : fmt::format("TCP to {}:53 (not the sandbox's resolver)", t.other_host_address);
            return tcp_probe(name, t.other_host_address, p, what, timeout);
        });
    }
    probes.emplace_back([&] { return dns_elsewhere_probe(t, timeout); });
    probes.emplace_back([&] { return proxy_probe(t, timeout); });
    probes.emplace_back([&] { return dns_denied_probe(t, timeout); });

    std::vector<ProbeResult> results(probes.size());
    std::vector<std::thread> threads;
    threads.reserve(probes.size());
    for (std::size_t i = 0; i < probes.size(); ++i) {
        threads.emplace_back([&, i] {
            // The namespace is this thread's alone; the thread ends with the probe.
            if (::setns(netns.fd(), CLONE_NEWNET) != 0) {
                results[i] = {{},
                              ProbeVerdict::Inconclusive,
                              fmt::format("cannot enter the sandbox's network namespace: {}", std::strerror(errno))};
                return;
            }
            try {
                results[i] = probes[i]();
            } catch (const std::exception& e) {
                results[i] = {{}, ProbeVerdict::Inconclusive, e.what()};
            }
        });
    }
    for (auto& thread : threads) thread.join();
    const auto& names = probe_names();
    for (std::size_t i = 0; i < results.size() && i < names.size(); ++i) {
        if (results[i].name.empty()) results[i].name = names[i];
    }
    return results;
}

}  // namespace agentctl::provider::incus
