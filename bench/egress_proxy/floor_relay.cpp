// A floor for the figures of bench/egress_proxy/run.sh: the least a CONNECT
// relay can do in user space on this machine, so that each figure can be read
// against what any proxy could reach here, not only against direct access
// (docs/benchmarks-history.md, ninth pass).
//
//   floor_relay --listen ADDR:PORT [--loops N]
//
// It has none of what makes agentctl's proxy a proxy: no policy (every
// IPv4 literal is dialled), no log, no timeouts, no DNS, no plain HTTP. What
// it keeps is the work no relay can skip: accept(2), read the head, connect(2),
// the 200, and the bytes moved with splice(2) through a pipe per direction.
// N loops (default 1), each a thread with an epoll(7) set of its own and a
// listener of its own on the same port (SO_REUSEPORT), all edge-triggered.
// It also takes the one kernel setting that spares a relay work: its sandbox
// leg runs cubic, unpaced, as agentctl's does (docs/benchmarks-history.md, "Eighth
// pass"), so that downloads are measured against the same kernel work.
// run.sh runs it as the "floor relay" column; it also stands for the least a
// program that listens needs to start.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

// "a.b.c.d:port", as --listen and a CONNECT target give it.
std::optional<sockaddr_in> ipv4_endpoint(std::string_view text) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(std::atoi(std::string(text.substr(colon + 1)).c_str())));
    if (::inet_pton(AF_INET, std::string(text.substr(0, colon)).c_str(), &address.sin_addr) != 1) return std::nullopt;
    return address;
}

constexpr std::size_t k_pipe_bytes = 1 << 20;
constexpr std::string_view k_established = "HTTP/1.1 200 Connection established\r\n\r\n";

struct Pipe {
    int read = -1;
    int write = -1;
    std::size_t held = 0;  // bytes in the pipe not yet passed on
};

struct Connection;

// What an epoll event points at: one side of a connection.
struct Side {
    Connection* connection = nullptr;
    int fd = -1;
    bool eof = false;      // nothing more will come from this side
    bool watched = false;  // in the epoll set
    bool writable_watched = false;
};

struct Connection {
    Side client;
    Side upstream;
    Pipe up;              // client -> upstream
    Pipe down;            // upstream -> client
    bool tunnel = false;  // the 200 is out
    bool done = false;    // closed; freed at the end of the event batch
    sockaddr_in target{};
    std::string head;
};

class Loop {
public:
    explicit Loop(const sockaddr_in& address) {
        m_epoll = ::epoll_create1(EPOLL_CLOEXEC);
        m_listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        ::setsockopt(m_listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        ::setsockopt(m_listener, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        ::setsockopt(m_listener, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // inherited by accepted sockets
        constexpr std::string_view k_unpaced = "cubic";                        // so is the congestion control
        ::setsockopt(m_listener, IPPROTO_TCP, TCP_CONGESTION, k_unpaced.data(), k_unpaced.size());
        if (::bind(m_listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(m_listener, 4096) != 0)
            throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
        epoll_event event{};
        event.events = EPOLLIN | EPOLLET;
        event.data.ptr = nullptr;  // the listener
        ::epoll_ctl(m_epoll, EPOLL_CTL_ADD, m_listener, &event);
    }

    void run() {
        epoll_event events[128];
        for (;;) {
            const int n = ::epoll_wait(m_epoll, events, 128, -1);
            for (int i = 0; i < n; ++i) {
                auto* side = static_cast<Side*>(events[i].data.ptr);
                if (side == nullptr)
                    accept_all();
                else if (!side->connection->done)
                    step(*side->connection);
            }
            // Freed only now: a later event of the same batch may point at one.
            for (Connection* connection : m_finished) delete connection;
            m_finished.clear();
        }
    }

private:
    void accept_all() {
        for (;;) {
            const int fd = ::accept4(m_listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) return;  // EAGAIN, or a client already gone
            auto* connection = new Connection;
            connection->client.connection = connection;
            connection->client.fd = fd;
            watch(connection->client);
            step(*connection);  // the head is usually there already
        }
    }

    // Readable always; writable only once a write has had to wait (and for
    // a connect(2) in progress): a fresh socket's writability is no news.
    void watch(Side& side, bool writable = false) {
        epoll_event event{};
        event.events = EPOLLIN | EPOLLRDHUP | EPOLLET | (writable ? EPOLLOUT : 0u);
        event.data.ptr = &side;
        if (::epoll_ctl(m_epoll, side.watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, side.fd, &event) == 0) {
            side.watched = true;
            side.writable_watched = writable;
        }
    }

    Pipe take_pipe() {
        if (!m_spare.empty()) {
            Pipe pipe = m_spare.back();
            m_spare.pop_back();
            return pipe;
        }
        int fds[2];
        if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return {};
        ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(k_pipe_bytes));
        return {fds[0], fds[1], 0};
    }

    void give_back(Pipe& pipe) {
        if (pipe.read < 0) return;
        if (pipe.held == 0) {
            m_spare.push_back(pipe);
        } else {
            ::close(pipe.read);
            ::close(pipe.write);
        }
        pipe = {};
    }

    void finish(Connection& connection) {
        ::close(connection.client.fd);  // close(2) takes a descriptor out of the epoll set
        if (connection.upstream.fd >= 0) ::close(connection.upstream.fd);
        give_back(connection.up);
        give_back(connection.down);
        connection.done = true;
        m_finished.push_back(&connection);
    }

    // Reads the head and dials its target; false when the connection is over.
    bool open_tunnel(Connection& connection) {
        Side& upstream = connection.upstream;
        int error = 0;
        if (upstream.fd < 0) {
            char buffer[4096];
            for (;;) {
                const ssize_t n = ::recv(connection.client.fd, buffer, sizeof buffer, 0);
                if (n == 0) return false;
                if (n < 0) return errno == EAGAIN;
                connection.head.append(buffer, static_cast<std::size_t>(n));
                if (connection.head.find("\r\n\r\n") != std::string::npos) break;
                if (connection.head.size() > 65536) return false;
            }
            // "CONNECT a.b.c.d:port HTTP/1.1", and nothing after the head (the
            // client waits for the 200)
            const std::string_view head = connection.head;
            const auto target = ipv4_endpoint(head.substr(8, head.find(' ', 8) - 8));
            if (!head.starts_with("CONNECT ") || !target || !head.ends_with("\r\n\r\n") ||
                head.find("\r\n\r\n") + 4 != head.size())
                return false;
            connection.target = *target;
            upstream.connection = &connection;
            upstream.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            error = dial(connection);
            // To a destination on this machine the handshake is over when the
            // first call returns; a second says so.
            if (error == EINPROGRESS) error = dial(connection);
        } else {
            error = dial(connection);
        }
        if (error == EINPROGRESS || error == EALREADY) {
            if (!upstream.writable_watched) watch(upstream, true);
            return true;  // dialled again when the socket is writable
        }
        if (error != 0 && error != EISCONN) return false;
        if (::send(connection.client.fd, k_established.data(), k_established.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(k_established.size()))
            return false;
        int one = 1;
        ::setsockopt(upstream.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (!upstream.watched) watch(upstream);
        connection.up = take_pipe();
        connection.down = take_pipe();
        connection.tunnel = true;
        return connection.up.read >= 0 && connection.down.read >= 0;
    }

    static int dial(const Connection& connection) {
        const auto* target = reinterpret_cast<const sockaddr*>(&connection.target);
        return ::connect(connection.upstream.fd, target, sizeof connection.target) == 0 ? 0 : errno;
    }

    // Moves what can be moved from `from` to `to`; false on an error.
    bool pump(Side& from, Side& to, Pipe& pipe) {
        for (;;) {
            if (pipe.held > 0) {
                const ssize_t out =
                    ::splice(pipe.read, nullptr, to.fd, nullptr, pipe.held, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (out < 0 && errno != EAGAIN) return false;
                if (out > 0) pipe.held -= static_cast<std::size_t>(out);
                if (pipe.held > 0) {  // the destination is full: its EPOLLOUT resumes
                    if (!to.writable_watched) watch(to, true);
                    return true;
                }
            }
            if (from.eof) return true;
            const ssize_t in =
                ::splice(from.fd, nullptr, pipe.write, nullptr, k_pipe_bytes, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (in == 0) {
                from.eof = true;
                ::shutdown(to.fd, SHUT_WR);
                return true;
            }
            if (in < 0) return errno == EAGAIN;
            pipe.held += static_cast<std::size_t>(in);
        }
    }

    void step(Connection& connection) {
        if (!connection.tunnel) {
            if (!open_tunnel(connection)) finish(connection);
            return;
        }
        if (!pump(connection.client, connection.upstream, connection.up) ||
            !pump(connection.upstream, connection.client, connection.down) ||
            (connection.client.eof && connection.upstream.eof && connection.up.held == 0 && connection.down.held == 0))
            finish(connection);
    }

    int m_epoll = -1;
    int m_listener = -1;
    std::vector<Pipe> m_spare;
    std::vector<Connection*> m_finished;
};

}  // namespace

int main(int argc, char** argv) {
    std::string listen = "127.0.0.1:18204";
    int loops = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view option = argv[i];
        if (option == "--listen") listen = argv[i + 1];
        if (option == "--loops") loops = std::max(1, std::atoi(argv[i + 1]));
    }
    ::signal(SIGPIPE, SIG_IGN);
    const auto address = ipv4_endpoint(listen);
    if (!address) {
        std::fprintf(stderr, "floor_relay: --listen ADDR:PORT (IPv4), got %s\n", listen.c_str());
        return 2;
    }
    try {
        std::vector<std::unique_ptr<Loop>> all;
        for (int i = 0; i < loops; ++i) all.push_back(std::make_unique<Loop>(*address));
        std::vector<std::thread> threads;
        for (int i = 1; i < loops; ++i) threads.emplace_back([loop = all[i].get()] { loop->run(); });
        all[0]->run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "floor_relay: %s\n", e.what());
        return 1;
    }
}
