// Load generator for bench/egress_proxy/run.sh. Blocking sockets, one thread
// per concurrent client; every figure is printed as one JSON object.
//
//   proxy_bench rate     --via PROXY|direct --target ADDR:PORT --path P --concurrency N --seconds S
//        new connection (+ CONNECT) + GET + read + close, repeated; rate and latency percentiles
//   proxy_bench download --via PROXY|direct --target ADDR:PORT --path P --repeat N
//        GET through one tunnel N times; MB/s per transfer (median) and overall
//   proxy_bench upload   --via PROXY|direct --target ADDR:PORT --megabytes M --repeat N
//        sends M MiB up a fresh tunnel to a sink N times; MB/s per transfer (median) and overall
//   proxy_bench sink     --listen ADDR:PORT
//        the upload's origin: reads each connection to its end, answers "received N\n", closes
//   proxy_bench idle     --via PROXY --target ADDR:PORT --count N
//        opens N tunnels, prints {"ready":N}, holds them until stdin closes
//   proxy_bench spawn    --port PORT -- COMMAND...
//        time from fork to the first accepted TCP connect on 127.0.0.1:PORT; the child is then killed
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Endpoint {
    std::string host;
    int port = 0;
};

Endpoint parse_endpoint(const std::string& text) {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("expected ADDR:PORT, got " + text);
    return {text.substr(0, colon), std::stoi(text.substr(colon + 1))};
}

sockaddr_in address_of(const Endpoint& endpoint) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(endpoint.port));
    ::inet_pton(AF_INET, endpoint.host.c_str(), &address.sin_addr);
    return address;
}

int dial(const Endpoint& endpoint) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in address = address_of(endpoint);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

bool send_all(int fd, const std::string& data) {
    std::size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

// Reads a response head; returns its status and Content-Length, leaves extra body bytes in `rest`.
bool read_head(int fd, int& status, long long& length, std::string& rest) {
    std::string buffer;
    char chunk[16384];
    while (buffer.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return false;
        buffer.append(chunk, static_cast<std::size_t>(n));
    }
    auto end = buffer.find("\r\n\r\n");
    std::string head = buffer.substr(0, end);
    rest = buffer.substr(end + 4);
    status = std::atoi(head.c_str() + 9);
    length = -1;
    std::string lower = head;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto at = lower.find("content-length:");
    if (at != std::string::npos) length = std::atoll(head.c_str() + at + 15);
    return true;
}

// Opens a connection to `target`, through `via` with CONNECT unless via is "direct".
int open_tunnel(const std::string& via, const Endpoint& target) {
    if (via == "direct") return dial(target);
    int fd = dial(parse_endpoint(via));
    if (fd < 0) return -1;
    std::string authority = target.host + ":" + std::to_string(target.port);
    if (!send_all(fd, "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n")) {
        ::close(fd);
        return -1;
    }
    int status = 0;
    long long length = 0;
    std::string rest;
    if (!read_head(fd, status, length, rest) || status != 200) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// GET path on an open connection; returns body bytes or -1.
long long get(int fd, const Endpoint& target, const std::string& path, bool close) {
    std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: " + target.host + "\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n";
    if (!send_all(fd, request)) return -1;
    int status = 0;
    long long length = 0;
    std::string rest;
    if (!read_head(fd, status, length, rest) || status != 200 || length < 0) return -1;
    long long got = static_cast<long long>(rest.size());
    // One buffer per thread: a fresh 1 MiB vector per request (zeroed, often
    // fresh pages) cost the load generator more CPU than a 1 KiB GET itself,
    // for every contender alike.
    thread_local std::vector<char> chunk(1 << 20);
    while (got < length) {
        ssize_t n = ::recv(fd, chunk.data(), chunk.size(), 0);
        if (n <= 0) return -1;
        got += n;
    }
    return got;
}

std::map<std::string, std::string> options(int argc, char** argv, int from) {
    std::map<std::string, std::string> out;
    for (int i = from; i + 1 < argc; i += 2) out[argv[i]] = argv[i + 1];
    return out;
}

int rate(std::map<std::string, std::string> o) {
    Endpoint target = parse_endpoint(o["--target"]);
    int concurrency = std::stoi(o["--concurrency"]);
    double seconds = std::stod(o["--seconds"]);
    std::vector<std::vector<double>> latencies(static_cast<std::size_t>(concurrency));
    std::atomic<long> failures{0};
    auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    std::vector<std::thread> threads;
    auto started = Clock::now();
    for (int t = 0; t < concurrency; ++t) {
        threads.emplace_back([&, t] {
            while (Clock::now() < deadline) {
                auto begin = Clock::now();
                int fd = open_tunnel(o["--via"], target);
                long long n = fd < 0 ? -1 : get(fd, target, o["--path"], true);
                if (fd >= 0) ::close(fd);
                if (n < 0) {
                    ++failures;
                    continue;
                }
                latencies[static_cast<std::size_t>(t)].push_back(
                    std::chrono::duration<double, std::micro>(Clock::now() - begin).count());
            }
        });
    }
    for (auto& th : threads) th.join();
    double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    std::vector<double> all;
    for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    auto pct = [&](double p) { return all.empty() ? 0.0 : all[static_cast<std::size_t>(p * (all.size() - 1))]; };
    std::printf("{\"requests\":%zu,\"failures\":%ld,\"rate\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f}\n", all.size(),
                failures.load(), static_cast<double>(all.size()) / elapsed, pct(0.5), pct(0.99));
    return failures.load() > 0 && all.empty() ? 1 : 0;
}

// The figures of a run of transfers: bytes, the median transfer's MB/s, and overall MB/s since `started`.
void print_transfers(long long total, std::vector<double> rates, Clock::time_point started) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    std::sort(rates.begin(), rates.end());
    std::printf("{\"bytes\":%lld,\"median_MBps\":%.1f,\"overall_MBps\":%.1f}\n", total, rates[rates.size() / 2],
                static_cast<double>(total) / 1e6 / elapsed);
}

int download(std::map<std::string, std::string> o) {
    Endpoint target = parse_endpoint(o["--target"]);
    int repeat = std::stoi(o["--repeat"]);
    int fd = open_tunnel(o["--via"], target);
    if (fd < 0) {
        std::printf("{\"error\":\"no tunnel\"}\n");
        return 1;
    }
    std::vector<double> rates;
    long long total = 0;
    auto started = Clock::now();
    for (int i = 0; i < repeat; ++i) {
        auto begin = Clock::now();
        long long n = get(fd, target, o["--path"], false);
        if (n < 0) {
            std::printf("{\"error\":\"transfer failed\"}\n");
            return 1;
        }
        total += n;
        rates.push_back(static_cast<double>(n) / 1e6 / std::chrono::duration<double>(Clock::now() - begin).count());
    }
    ::close(fd);
    print_transfers(total, rates, started);
    return 0;
}

int upload(std::map<std::string, std::string> o) {
    Endpoint target = parse_endpoint(o["--target"]);
    const long long bytes = std::stoll(o["--megabytes"]) << 20;
    const int repeat = std::stoi(o["--repeat"]);
    const std::string block(1 << 20, 'u');
    std::vector<double> rates;
    long long total = 0;
    auto started = Clock::now();
    for (int i = 0; i < repeat; ++i) {
        auto begin = Clock::now();
        int fd = open_tunnel(o["--via"], target);
        bool sent = fd >= 0;
        for (long long done = 0; sent && done < bytes; done += static_cast<long long>(block.size())) {
            sent = send_all(fd, block);
        }
        char answer[64] = {};
        if (sent) ::shutdown(fd, SHUT_WR);
        const bool answered = sent && ::recv(fd, answer, sizeof answer - 1, MSG_WAITALL) > 0 &&
                              std::atoll(answer + 9) == bytes;  // "received N"
        if (fd >= 0) ::close(fd);
        if (!answered) {
            std::printf("{\"error\":\"upload %d failed\"}\n", i);
            return 1;
        }
        total += bytes;
        rates.push_back(static_cast<double>(bytes) / 1e6 / std::chrono::duration<double>(Clock::now() - begin).count());
    }
    print_transfers(total, rates, started);
    return 0;
}

int sink(std::map<std::string, std::string> o) {
    int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address = address_of(parse_endpoint(o["--listen"]));
    if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listener, 128) != 0) {
        std::perror("proxy_bench sink");
        return 1;
    }
    for (;;) {
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        std::thread([fd] {
            std::vector<char> chunk(1 << 20);
            long long got = 0;
            for (ssize_t n; (n = ::recv(fd, chunk.data(), chunk.size(), 0)) > 0;) got += n;
            send_all(fd, "received " + std::to_string(got) + "\n");
            ::close(fd);
        }).detach();
    }
}

int idle(std::map<std::string, std::string> o) {
    Endpoint target = parse_endpoint(o["--target"]);
    int count = std::stoi(o["--count"]);
    std::vector<int> fds;
    for (int i = 0; i < count; ++i) {
        int fd = open_tunnel(o["--via"], target);
        if (fd < 0) {
            std::printf("{\"error\":\"tunnel %d failed\"}\n", i);
            return 1;
        }
        fds.push_back(fd);
    }
    std::printf("{\"ready\":%d}\n", count);
    std::fflush(stdout);
    char c;
    while (::read(STDIN_FILENO, &c, 1) > 0) {
    }
    for (int fd : fds) ::close(fd);
    return 0;
}

int spawn(int argc, char** argv) {
    int port = 0;
    int i = 2;
    for (; i < argc; ++i) {
        if (std::string(argv[i]) == "--port")
            port = std::stoi(argv[++i]);
        else if (std::string(argv[i]) == "--")
            break;
    }
    std::vector<char*> command(argv + i + 1, argv + argc);
    command.push_back(nullptr);
    auto begin = Clock::now();
    pid_t pid = ::fork();
    if (pid == 0) {
        int devnull = ::open("/dev/null", O_WRONLY);
        ::dup2(devnull, STDOUT_FILENO);
        ::dup2(devnull, STDERR_FILENO);
        ::execvp(command[0], command.data());
        _exit(127);
    }
    double ms = -1;
    while (Clock::now() - begin < std::chrono::seconds(10)) {
        int fd = dial({"127.0.0.1", port});
        if (fd >= 0) {
            ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
            ::close(fd);
            break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ::kill(pid, SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    std::printf("{\"listening_ms\":%.2f}\n", ms);
    return ms < 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: proxy_bench rate|download|upload|sink|idle|spawn ...\n");
        return 2;
    }
    ::signal(SIGPIPE, SIG_IGN);
    std::string mode = argv[1];
    try {
        if (mode == "rate") return rate(options(argc, argv, 2));
        if (mode == "download") return download(options(argc, argv, 2));
        if (mode == "upload") return upload(options(argc, argv, 2));
        if (mode == "sink") return sink(options(argc, argv, 2));
        if (mode == "idle") return idle(options(argc, argv, 2));
        if (mode == "spawn") return spawn(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "proxy_bench: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "proxy_bench: unknown mode %s\n", mode.c_str());
    return 2;
}
