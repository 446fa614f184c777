#include "suite_support.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <linux/sock_diag.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/files.hpp"
#include "egress_proxy/egress_proxy.hpp"

extern char** environ;

namespace suite {

const char* upstream_bin() { return EGRESS_PROXY_UPSTREAM_BIN; }
const char* runner_bin() { return EGRESS_PROXY_RUNNER_BIN; }
const char* tls_origin_bin() { return EGRESS_PROXY_TLS_ORIGIN_BIN; }

namespace fs = std::filesystem;
using namespace std::chrono_literals;

int run(const std::string& command) {
    int status = std::system((command + " >/dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void must(const std::string& command) {
    if (run(command) != 0) throw std::runtime_error("setup command failed: " + command);
}

namespace {

// A log request that prints JSON Lines (`json`), following with `follow`.
[[maybe_unused]] agentctl::LogRequest json_lines(bool json = true, bool follow = false) {
    agentctl::LogRequest request;
    request.json = json;
    request.follow = follow;
    return request;
}

constexpr std::string_view k_namespace_prefix = "ag11proxy";  // + the pid of the suite that made it
constexpr std::string_view k_veth_prefix = "ag11x";           // + that pid + "a" (this side) or "b"

// A run killed part-way leaves its namespace and veth pair behind, still
// holding 192.0.3.0/24 (and the next run's route check would refuse to start).
// They are named after that run's pid, so the ones whose suite is gone are
// known to be this suite's own leftovers, and go.
void remove_leftover_networks() {
    std::string list;
    if (run_capture("ip netns list", list) != 0) return;
    std::istringstream lines(list);
    for (std::string line; std::getline(lines, line);) {
        std::string name = line.substr(0, line.find(' '));
        if (!name.starts_with(k_namespace_prefix)) continue;
        std::string pid = name.substr(k_namespace_prefix.size());
        if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
        if (::kill(std::stoi(pid), 0) == 0 || errno != ESRCH) continue;  // its suite still runs
        run("ip netns pids " + name + " | xargs -r kill -KILL");         // its origin servers, if they outlived it
        run("ip netns del " + name);
        run("ip link del " + std::string(k_veth_prefix) + pid + "a");
    }
}

}  // namespace

std::optional<std::string> skip_reason() {
    if (::geteuid() != 0) return "needs root to create network namespaces and veth pairs";
    if (run("ip -V") != 0) return "needs iproute2 (`ip`)";
    std::string probe = "ag11probe" + std::to_string(::getpid());
    if (run("ip netns add " + probe) != 0) return "cannot create a network namespace here";
    run("ip netns del " + probe);
    return std::nullopt;
}

// ------------------------------------------------------------------ Child

Child::Child(const std::vector<std::string>& argv) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = ::posix_spawnp(&m_pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    m_stdout = fds[0];
    if (rc != 0) {
        ::close(m_stdout);
        throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
    }
}

Child::~Child() {
    if (!m_reaped && m_pid > 0) {
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, nullptr, 0);
    }
    if (m_stdout >= 0) ::close(m_stdout);
}

std::string Child::wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        for (auto nl = m_pending.find('\n'); nl != std::string::npos; nl = m_pending.find('\n')) {
            std::string line = m_pending.substr(0, nl);
            m_pending.erase(0, nl + 1);
            if (line.rfind(prefix, 0) == 0) return line;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return {};
        pollfd p{m_stdout, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
        char buffer[4096];
        ssize_t n = ::read(m_stdout, buffer, sizeof buffer);
        if (n <= 0) return {};
        m_pending.append(buffer, static_cast<std::size_t>(n));
    }
}

void Child::signal(int signal_number) const { ::kill(m_pid, signal_number); }

int Child::wait_exit(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
            m_reaped = true;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        std::this_thread::sleep_for(5ms);
    }
    return -1;
}

// ------------------------------------------------------------------ Network

Network::Network() {
    std::string id = std::to_string(::getpid());
    // Names and subnets are this suite's own (ag11*, 192.0.3.0/24, 10.231.0.0/24),
    // so it can run next to other suites that build namespaces on this machine.
    name = std::string(k_namespace_prefix) + id;
    m_veth = std::string(k_veth_prefix) + id;
    remove_leftover_networks();
    run("ip netns del " + name);
    run("ip link del " + m_veth + "a");
    try {
        must("ip netns add " + name);
        must("ip link add " + m_veth + "a type veth peer name " + m_veth + "b");
        must("ip link set " + m_veth + "b netns " + name);
        must("ip addr add " + std::string(k_host_side) + "/24 dev " + m_veth + "a");
        must("ip addr add 10.231.0.1/24 dev " + m_veth + "a");
        must("ip link set " + m_veth + "a up");
        std::string in_ns = "ip netns exec " + name + " ";
        must(in_ns + "ip link set lo up");
        must(in_ns + "ip addr add " + std::string(k_origin_a) + "/24 dev " + m_veth + "b");
        must(in_ns + "ip addr add " + std::string(k_origin_b) + "/24 dev " + m_veth + "b");
        must(in_ns + "ip addr add " + std::string(k_lan_origin) + "/24 dev " + m_veth + "b");
        must(in_ns + "ip link set " + m_veth + "b up");
        // Test traffic goes to this pair only: every origin must be routed through it.
        for (const char* origin : {k_origin_a, k_origin_b, k_lan_origin}) {
            std::string route;
            run_capture(std::string("ip -o route get ") + origin, route);
            if (route.find(" dev " + m_veth + "a ") == std::string::npos)
                throw std::runtime_error(std::string(origin) + " is not routed to this suite's veth " + m_veth +
                                         "a but: " + route);
        }
        // Addresses go through duplicate address detection only for v6; v4 is usable at once.
        m_upstream.emplace(std::vector<std::string>{
            "ip", "netns", "exec", name, EGRESS_PROXY_UPSTREAM_BIN, "http:" + std::string(k_origin_a) + ":80",
            "echo:" + std::string(k_origin_a) + ":7", "echo:" + std::string(k_origin_a) + ":9",
            "drain:" + std::string(k_origin_a) + ":10", "sink:" + std::string(k_origin_a) + ":11",
            "greet:" + std::string(k_origin_a) + ":25", "backlog:" + std::string(k_origin_a) + ":81",
            "late:" + std::string(k_origin_a) + ":82", "http:" + std::string(k_origin_b) + ":80",
            "http:" + std::string(k_lan_origin) + ":80"});
        if (m_upstream->wait_for_line("ready", 10s).empty())
            throw std::runtime_error("the origin servers did not start");
    } catch (...) {
        m_upstream.reset();
        run("ip netns del " + name);
        run("ip link del " + m_veth + "a");
        throw;
    }
}

void Network::open_late_origin() { m_upstream->signal(SIGUSR1); }

Network::~Network() {
    if (m_upstream) {
        m_upstream->signal(SIGTERM);
        m_upstream->wait_exit(2s);
    }
    m_upstream.reset();
    run("ip netns del " + name);
    run("ip link del " + m_veth + "a");
}

// ------------------------------------------------------------------ files and proxy

ProxyFiles::ProxyFiles() {
    static int counter = 0;
    dir = fs::temp_directory_path() /
          ("agentctl-proxy-suite-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)) / "dev1";
    fs::remove_all(dir.parent_path());
    fs::create_directories(dir);
    policy = dir / "egress-policy.json";
    resolve = dir / "hosts";
    log = dir / "egress-proxy.log";
    pid = dir / "egress-proxy.pid";
    write_resolve("");
}

ProxyFiles::~ProxyFiles() {
    std::error_code ignored;
    fs::remove_all(dir.parent_path(), ignored);
}

void ProxyFiles::write_policy(const agentctl::policy::NetworkPolicy& p) const {
    agentctl::core::write_file_atomic(policy, agentctl::policy::to_policy_file(p).dump(2));
}

void ProxyFiles::write_resolve(const std::string& hosts_text) const {
    agentctl::core::write_file_atomic(resolve, hosts_text);
}

std::vector<nlohmann::json> ProxyFiles::log_lines() const {
    // The proxy writes queued log lines within 20 ms (egress_proxy.cpp, k_log_flush).
    std::this_thread::sleep_for(60ms);
    // Every kept file (the refusals are in one of their own), merged in time
    // order, as `agentctl logs --network --json` prints them.
    std::ostringstream merged;
    agentctl::egress_proxy::print_network_log(log.string(), json_lines(), merged);
    std::vector<nlohmann::json> out;
    std::istringstream in(merged.str());
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
}

std::vector<nlohmann::json> ProxyFiles::close_records(const std::string& host, std::size_t count) const {
    for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
        std::vector<nlohmann::json> found;
        for (const auto& line : log_lines()) {
            if (line.value("event", "") == "close" && line.value("host", "") == host) found.push_back(line);
        }
        if (found.size() >= count) return found;
    }
    return {};
}

Proxy::Proxy(const ProxyFiles& files, std::vector<std::string> extra_flags, const std::string& binary) {
    std::vector<std::string> argv;
    if (binary.empty()) {
        argv.push_back(EGRESS_PROXY_RUNNER_BIN);
    } else {
        argv.push_back(binary);
        argv.push_back("egress-proxy");
    }
    for (const auto& a : {std::string("--listen"), std::string("127.0.0.1:0"), std::string("--policy"),
                          files.policy.string(), std::string("--log"), files.log.string(), std::string("--pid-file"),
                          files.pid.string(), std::string("--resolve-file"), files.resolve.string()}) {
        argv.push_back(a);
    }
    for (auto& a : extra_flags) argv.push_back(std::move(a));
    m_child.emplace(argv);
    std::string line = m_child->wait_for_line("listening ", 10s);
    if (line.empty()) throw std::runtime_error("the proxy did not start listening");
    port = static_cast<std::uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
}

agentctl::policy::NetworkPolicy policy_allowing(const std::vector<std::string>& entries, bool allow_lan) {
    agentctl::policy::NetworkPolicy p;
    p.allow_lan = allow_lan;
    p.deny_lan = !allow_lan;
    for (const auto& e : entries) p.allow.push_back(agentctl::policy::parse_allow_entry(e, "--allow"));
    return p;
}

// ------------------------------------------------------------------ Client

Client::Client(std::uint16_t proxy_port, std::chrono::milliseconds timeout) {
    m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (m_fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    set_timeout(timeout);
    int one = 1;
    ::setsockopt(m_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(proxy_port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(m_fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        int err = errno;
        ::close(m_fd);
        throw std::runtime_error(std::string("connect to the proxy: ") + std::strerror(err));
    }
}

void Client::set_timeout(std::chrono::milliseconds timeout) const {
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
    ::setsockopt(m_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(m_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

Client::~Client() {
    if (m_fd >= 0) ::close(m_fd);
}

Client::Client(Client&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)), m_buffer(std::move(other.m_buffer)) {}

void Client::send(const std::string& bytes) const {
    std::size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::send(m_fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
        if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
}

bool Client::fill() {
    char buffer[65536];
    ssize_t n = ::recv(m_fd, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    m_buffer.append(buffer, static_cast<std::size_t>(n));
    return true;
}

std::string Client::Response::header(const std::string& name) const {
    std::string lower_head = head;
    for (auto& c : lower_head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string key = "\r\n" + name + ":";
    for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto at = lower_head.find(key);
    if (at == std::string::npos) return {};
    auto start = at + key.size();
    auto end = head.find("\r\n", start);
    std::string value = head.substr(start, end - start);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    return value;
}

Client::Response Client::read_response() {
    Response response;
    std::size_t end;
    while ((end = m_buffer.find("\r\n\r\n")) == std::string::npos) {
        if (!fill()) return response;
    }
    response.head = m_buffer.substr(0, end + 2);
    m_buffer.erase(0, end + 4);
    if (response.head.size() > 12) response.status = std::stoi(response.head.substr(9, 3));
    auto length = response.header("Content-Length");
    if (!length.empty()) {
        response.body = read_exact(std::stoul(length));
    } else if (response.header("Transfer-Encoding") == "chunked") {
        // Minimal de-chunking for the suite's own checks.
        for (;;) {
            std::size_t nl;
            while ((nl = m_buffer.find("\r\n")) == std::string::npos) {
                if (!fill()) return response;
            }
            std::size_t size = std::stoul(m_buffer.substr(0, nl), nullptr, 16);
            m_buffer.erase(0, nl + 2);
            response.body += read_exact(size);
            read_exact(2);
            if (size == 0) break;
        }
    }
    return response;
}

std::string Client::read_exact(std::size_t n) {
    while (m_buffer.size() < n) {
        if (!fill()) break;
    }
    std::string out = m_buffer.substr(0, std::min(n, m_buffer.size()));
    m_buffer.erase(0, out.size());
    return out;
}

bool Client::closed_by_peer() {
    m_buffer.clear();
    for (;;) {
        char buffer[4096];
        ssize_t n = ::recv(m_fd, buffer, sizeof buffer, 0);
        if (n == 0) return true;
        if (n < 0) return errno == ECONNRESET || errno == EPIPE;
    }
}

std::string Client::read_to_end() {
    std::string out = std::move(m_buffer);
    m_buffer.clear();
    for (;;) {
        char buffer[65536];
        ssize_t n = ::recv(m_fd, buffer, sizeof buffer, 0);
        if (n <= 0) return out;
        out.append(buffer, static_cast<std::size_t>(n));
    }
}

void Client::shutdown_send() const { ::shutdown(m_fd, SHUT_WR); }

int run_capture(const std::string& command, std::string& output) {
    output.clear();
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) return -1;
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
    int status = ::pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Client::Response connect_through(Client& client, const std::string& authority) {
    client.send("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
    return client.read_response();
}

bool echo_on(Client& client, const std::string& text) {
    client.send(text);
    return client.read_exact(text.size()) == text;
}

std::size_t open_fds(pid_t pid) {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) ++count;
    return count;
}

namespace {

// Calls `use` with a duplicate (pidfd_getfd(2)) of each of the process's
// descriptors whose /proc link starts with `kind` ("pipe:", "socket:"), once
// per link target however many of its descriptors are open.
void for_each_descriptor(pid_t pid, const std::string& kind, const std::function<void(int)>& use) {
    // Through syscall(2): glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++.
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) throw std::runtime_error(std::string("pidfd_open: ") + std::strerror(errno));
    std::set<std::string> seen;
    for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
        std::error_code ec;
        std::string target = fs::read_symlink(entry.path(), ec).string();
        if (ec || target.rfind(kind, 0) != 0 || !seen.insert(target).second) continue;
        int fd = static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, std::stoi(entry.path().filename().string()), 0));
        if (fd < 0) continue;  // closed since the listing
        use(fd);
        ::close(fd);
    }
    ::close(pidfd);
}

}  // namespace

std::size_t pipes_of_size(pid_t pid, std::size_t bytes) {
    std::size_t count = 0;
    for_each_descriptor(pid, "pipe:", [&](int fd) {
        int size = ::fcntl(fd, F_GETPIPE_SZ);
        if (size > 0 && static_cast<std::size_t>(size) >= bytes) ++count;
    });
    return count;
}

std::string congestion_control_of(pid_t pid, std::uint16_t peer_port) {
    std::string found;
    for_each_descriptor(pid, "socket:", [&](int fd) {
        sockaddr_storage peer{};
        socklen_t length = sizeof peer;
        if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0 || peer.ss_family != AF_INET) return;
        if (ntohs(reinterpret_cast<const sockaddr_in&>(peer).sin_port) != peer_port) return;
        char name[32] = {};
        socklen_t size = sizeof name - 1;
        if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &size) == 0) found = name;
    });
    return found;
}

std::size_t socket_memory_bytes(pid_t pid) {
    std::size_t total = 0;
    for_each_descriptor(pid, "socket:", [&](int fd) {
        std::uint32_t info[SK_MEMINFO_VARS] = {};
        socklen_t length = sizeof info;
        if (::getsockopt(fd, SOL_SOCKET, SO_MEMINFO, info, &length) != 0) return;
        total += info[SK_MEMINFO_RMEM_ALLOC] + info[SK_MEMINFO_WMEM_QUEUED];
    });
    return total;
}

std::size_t rss_kib(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
    }
    return 0;
}

CodeKib executable_code_kib(pid_t pid) {
    const auto proc = "/proc/" + std::to_string(pid);
    const auto exe = std::filesystem::read_symlink(proc + "/exe").string();
    std::ifstream in(proc + "/smaps");
    CodeKib code;
    bool in_code = false;
    for (std::string line; std::getline(in, line);) {
        unsigned long start = 0;
        unsigned long end = 0;
        char perms[5] = {};
        int path_at = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx %4s %*x %*s %*u %n", &start, &end, perms, &path_at) == 3 &&
            path_at > 0) {
            in_code = std::string_view(perms) == "r-xp" && line.substr(static_cast<std::size_t>(path_at)) == exe;
            if (in_code) code.size += (end - start) / 1024;
        } else if (in_code && line.rfind("Rss:", 0) == 0) {
            code.resident += std::stoul(line.substr(4));
        }
    }
    return code;
}

}  // namespace suite
