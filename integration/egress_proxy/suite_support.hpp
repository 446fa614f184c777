// Shared scaffolding for the egress proxy suite: a network namespace with the
// test origins, the proxy process, and blocking client helpers. Everything the
// suite talks to is on this machine: the proxy on loopback and the origins in
// a namespace reached over a veth pair the suite creates: 192.0.3.0/24 stands
// in for public hosts and 10.231.0.0/24 for the LAN. The documentation ranges
// (192.0.2/24, 198.51.100/24, 203.0.113/24) cannot play the public hosts: the
// policy refuses them as never-routable. 192.0.3.0/24 is routed to the veth
// pair for the suite's lifetime only (a connected route, more specific than
// any default route), so no packet of the suite leaves this machine.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agentctl/policy.hpp"

// Ends the current test case with a warning naming the reason when the suite
// cannot run here (Catch2's WARN: use it first in a TEST_CASE).
#define SUITE_REQUIRE_READY()                         \
    if (auto why = suite::skip_reason()) {            \
        WARN("egress proxy suite skipped: " << *why); \
        return;                                       \
    }

namespace suite {

// The suite's helper programs (their paths are compiled into suite_support.cpp alone).
[[nodiscard]] const char* upstream_bin();
[[nodiscard]] const char* runner_bin();
[[nodiscard]] const char* tls_origin_bin();

// Why the suite cannot run here (not root, no `ip`, namespaces unavailable), or nullopt.
std::optional<std::string> skip_reason();

// A child process with its stdout on a pipe.
class Child {
public:
    explicit Child(const std::vector<std::string>& argv);
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    // Reads stdout until a line starting with `prefix`; returns it ("" on timeout or EOF).
    std::string wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout);
    void signal(int signal_number) const;
    // Waits up to `timeout`; returns the exit code, or -1 when it did not exit (then kills it).
    int wait_exit(std::chrono::milliseconds timeout);
    [[nodiscard]] pid_t pid() const { return m_pid; }

private:
    pid_t m_pid = -1;
    int m_stdout = -1;
    std::string m_pending;
    bool m_reaped = false;
};

// The namespace, its veth pair and the origin servers in it; removed on destruction.
class Network {
public:
    Network();
    ~Network();
    Network(const Network&) = delete;
    Network& operator=(const Network&) = delete;

    static constexpr const char* k_host_side = "192.0.3.1";  // this machine's end of the veth pair
    // http :80, echo :7 and :9, drain :10, sink :11, greet :25, backlog :81, late :82 (open_late_origin)
    static constexpr const char* k_origin_a = "192.0.3.2";
    static constexpr const char* k_origin_b = "192.0.3.3";     // http :80
    static constexpr const char* k_lan_origin = "10.231.0.2";  // http :80
    std::string name;

    // The origin at k_origin_a:82 drops SYNs (its accept queue is full) until
    // this is called; from then on it accepts and echoes.
    void open_late_origin();

private:
    std::string m_veth;
    std::optional<Child> m_upstream;
};

// A scratch directory with the policy, resolve file, log and pid file.
struct ProxyFiles {
    ProxyFiles();
    ~ProxyFiles();
    std::filesystem::path dir, policy, resolve, log, pid;
    void write_policy(const agentctl::policy::NetworkPolicy& policy) const;
    void write_resolve(const std::string& hosts_text) const;
    [[nodiscard]] std::vector<nlohmann::json> log_lines() const;
    // The `close` records of `host` once `count` of them are in the log
    // (polled; empty when they are not there within 10 s).
    [[nodiscard]] std::vector<nlohmann::json> close_records(const std::string& host, std::size_t count = 1) const;
};

// The proxy under test. `binary` empty: the suite's runner (accepts limit flags).
class Proxy {
public:
    Proxy(const ProxyFiles& files, std::vector<std::string> extra_flags = {}, const std::string& binary = {});
    std::uint16_t port = 0;
    Child& process() { return *m_child; }

private:
    std::optional<Child> m_child;
};

[[nodiscard]] agentctl::policy::NetworkPolicy policy_allowing(const std::vector<std::string>& entries,
                                                              bool allow_lan = false);

// Blocking client socket to the proxy with a receive timeout.
class Client {
public:
    explicit Client(std::uint16_t proxy_port, std::chrono::milliseconds timeout = std::chrono::seconds(5));
    ~Client();
    Client(Client&& other) noexcept;
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // The receive and send timeout from now on (the constructor's `timeout`).
    void set_timeout(std::chrono::milliseconds timeout) const;
    void send(const std::string& bytes) const;
    // Reads one response head (up to CRLFCRLF) and, with Content-Length, its body.
    struct Response {
        int status = 0;
        std::string head;
        std::string body;
        [[nodiscard]] std::string header(const std::string& name) const;
    };
    Response read_response();
    // Reads exactly n bytes (fewer on EOF/timeout).
    std::string read_exact(std::size_t n);
    // True when the proxy closed the connection (EOF or reset) within the timeout.
    bool closed_by_peer();
    // Everything until EOF (or the timeout).
    std::string read_to_end();
    // shutdown(SHUT_WR): a half-close, the connection stays open for reading.
    void shutdown_send() const;
    [[nodiscard]] int fd() const { return m_fd; }

private:
    int m_fd = -1;
    std::string m_buffer;
    bool fill();
};

// CONNECT host:port; returns the response (status 200 leaves the tunnel open on `client`).
Client::Response connect_through(Client& client, const std::string& authority);
// Sends `text` on an open tunnel to an echo origin; true when it comes back whole.
bool echo_on(Client& client, const std::string& text);

// Runs a shell command; returns its exit code, and its stdout and stderr in `output`.
int run_capture(const std::string& command, std::string& output);
// Runs a shell command with its output discarded; returns its exit code.
int run(const std::string& command);
// run(), throwing std::runtime_error naming the command when it fails (test set-up).
void must(const std::string& command);

// Descriptors and resident memory of a process.
std::size_t open_fds(pid_t pid);
std::size_t rss_kib(pid_t pid);
// The process's executable's code (its r-xp mapping): how much of it is
// resident (mapped) and its size, KiB.
struct CodeKib {
    std::size_t resident = 0;
    std::size_t size = 0;
};
CodeKib executable_code_kib(pid_t pid);
// How many of the process's pipes hold at least `bytes` when full (each pipe
// counted once, however many of its ends are open). Reads the sizes through
// duplicates of the descriptors (pidfd_getfd(2), Linux 5.6; needs root).
std::size_t pipes_of_size(pid_t pid, std::size_t bytes);
// The congestion control (TCP_CONGESTION) of the process's IPv4 TCP socket
// whose peer has port `peer_port`; empty when it has none. Same means as above.
std::string congestion_control_of(pid_t pid, std::uint16_t peer_port);
// Bytes the kernel holds for the process's sockets (SO_MEMINFO: receive
// queues plus send queues), summed over its sockets. Same means as above.
std::size_t socket_memory_bytes(pid_t pid);

}  // namespace suite
