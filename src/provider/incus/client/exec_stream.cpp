// Copies an exec operation's stdout and stderr from its websockets to file
// descriptors, one thread per stream, over connections the Transport opens
// (the unix socket, or TLS to a remote): the upgrade request is written and
// its answer read here, and so are the frames.
#include "provider/incus/client/exec_stream.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::provider::incus {
namespace {

constexpr std::size_t k_chunk = 64 * 1024;
constexpr std::size_t k_max_upgrade_header = 16 * 1024;

// One websocket (RFC 6455 section 5.2): its frames are read here so that a
// frame the server sent just before it closed is still read after a write to
// it failed. Bytes that arrived with the upgrade response wait in `pending`.
struct Connection {
    std::unique_ptr<ByteStream> stream;
    std::string pending;
    std::mutex sending;  // pongs and forwarded signals share the control stream

    // Reads exactly `size` bytes; false at the end of the connection.
    bool read_exact(char* out, std::size_t size) {
        const auto from_pending = std::min(size, pending.size());
        if (from_pending > 0) {
            std::memcpy(out, pending.data(), from_pending);
            pending.erase(0, from_pending);
        }
        std::size_t done = from_pending;
        while (done < size) {
            const auto n = stream->read_some(out + done, size - done);
            if (n == 0) return false;
            done += n;
        }
        return true;
    }

    // A client frame (masked, as RFC 6455 requires; the mask is zero, so the
    // payload goes as it is). False when the server has closed this connection.
    bool send(unsigned char opcode, const char* payload, std::size_t size) {
        std::string header;
        header.push_back(static_cast<char>(0x80 | opcode));
        if (size < 126) {
            header.push_back(static_cast<char>(0x80 | size));
        } else if (size <= 0xFFFF) {
            header.push_back(static_cast<char>(0x80 | 126));
            for (int shift = 8; shift >= 0; shift -= 8) header.push_back(static_cast<char>((size >> shift) & 0xFF));
        } else {
            header.push_back(static_cast<char>(0x80 | 127));
            for (int shift = 56; shift >= 0; shift -= 8) header.push_back(static_cast<char>((size >> shift) & 0xFF));
        }
        header.append(4, '\0');
        std::lock_guard lock(sending);
        return stream->write_all(header.data(), header.size()) && (size == 0 || stream->write_all(payload, size));
    }

    // A close frame with status 1000 (normal closure).
    void close() {
        const char normal[2] = {static_cast<char>(0x03), static_cast<char>(0xE8)};
        (void)send(0x8, normal, 2);
    }
};

std::unique_ptr<Connection> open(Transport& transport, const std::string& target) {
    auto conn = std::make_unique<Connection>();
    conn->stream = transport.open_stream();
    const auto request = fmt::format(
        "GET {} HTTP/1.1\r\nHost: incus\r\nUser-Agent: agentctl\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: YWdlbnRjdGwtZXhlYy1rZXk=\r\nSec-WebSocket-Version: 13\r\n\r\n",
        target);
    std::string problem;
    if (!conn->stream->write_all(request.data(), request.size())) problem = "the connection closed";
    std::string header;
    while (problem.empty()) {
        const auto end = header.find("\r\n\r\n");
        if (end != std::string::npos) {
            conn->pending = header.substr(end + 4);
            header.resize(end);
            break;
        }
        if (header.size() > k_max_upgrade_header) {
            problem = "the answer's header is too long";
            break;
        }
        char buffer[4096];
        const auto n = conn->stream->read_some(buffer, sizeof buffer);
        if (n == 0) problem = "the connection closed";
        header.append(buffer, n);
    }
    // "HTTP/1.1 101 Switching Protocols"
    if (problem.empty() && (header.size() < 12 || header.compare(9, 3, "101") != 0)) {
        problem = fmt::format("the daemon answered \"{}\"", header.substr(0, header.find("\r\n")));
    }
    if (!problem.empty()) {
        throw Error(fmt::format("cannot open the exec stream {} at {}: {}", target.substr(0, target.find('?')),
                                transport.endpoint(), problem));
    }
    return conn;
}

// Writes all of `data` to `fd`; false when the reader went away.
bool write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const auto n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

// Copies the data frames of one stream to `fd` (-1: drop them) until a close
// frame or the end of the connection; answers pings. After the reader of `fd`
// went away the rest is read and dropped, so the command is never stuck.
void pump(Connection& conn, int fd) {
    std::unique_ptr<char[]> chunk(new char[k_chunk]);
    bool writable = fd >= 0;
    for (;;) {
        unsigned char head[2];
        if (!conn.read_exact(reinterpret_cast<char*>(head), 2)) return;
        const unsigned opcode = head[0] & 0x0F;
        std::uint64_t size = head[1] & 0x7F;
        if (size >= 126) {
            unsigned char ext[8];
            const std::size_t bytes = size == 126 ? 2 : 8;
            if (!conn.read_exact(reinterpret_cast<char*>(ext), bytes)) return;
            size = 0;
            for (std::size_t i = 0; i < bytes; ++i) size = (size << 8) | ext[i];
        }
        unsigned char mask[4] = {0, 0, 0, 0};
        const bool masked = (head[1] & 0x80) != 0;
        if (masked && !conn.read_exact(reinterpret_cast<char*>(mask), 4)) return;
        std::uint64_t offset = 0;
        while (offset < size) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(size - offset, k_chunk));
            if (!conn.read_exact(chunk.get(), n)) return;
            if (masked) {
                for (std::size_t i = 0; i < n; ++i) chunk[i] = static_cast<char>(chunk[i] ^ mask[(offset + i) % 4]);
            }
            if (opcode <= 0x2 && writable) writable = write_all(fd, chunk.get(), n);
            if (opcode == 0x9 && size <= 125) (void)conn.send(0xA, chunk.get(), n);  // ping -> pong
            offset += n;
        }
        if (opcode == 0x9 && size == 0) (void)conn.send(0xA, nullptr, 0);
        if (opcode == 0x8) return;  // close
    }
}

// Copies `in_fd` to the stdin websocket, one binary frame per read, until
// end-of-file, then closes the websocket: the command reads end-of-file.
// Returns early, without closing, once `stop_fd` is readable (the command
// ended) or the server closed the connection. The bytes go as they are read:
// binary data and partial lines reach the command unchanged.
void feed(Connection& conn, int in_fd, int stop_fd) {
    std::unique_ptr<char[]> chunk(new char[k_chunk]);
    for (;;) {
        pollfd fds[2] = {{in_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (fds[1].revents != 0) return;
        if (fds[0].revents == 0) continue;
        const auto n = ::read(in_fd, chunk.get(), k_chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;  // end of file (or stdin unusable: the same to the command)
        if (!conn.send(0x2, chunk.get(), static_cast<std::size_t>(n))) return;
    }
    conn.close();
}

// Signals this process gets while the command runs go to the command: Ctrl-C
// (SIGINT), SIGTERM, SIGHUP and SIGQUIT, as `incus exec` forwards them. The
// handler only writes the signal's number to a pipe; a thread sends it as a
// control message ({"command": "signal", "signal": N}).
int g_signal_pipe = -1;

extern "C" void note_signal(int signal) {
    const int saved = errno;
    const auto byte = static_cast<unsigned char>(signal);
    if (g_signal_pipe >= 0) (void)!::write(g_signal_pipe, &byte, 1);
    errno = saved;
}

class SignalForwarder {
public:
    explicit SignalForwarder(Connection& control) : m_control(control) {
        if (::pipe2(m_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
        g_signal_pipe = m_pipe[1];
        struct sigaction action {};
        action.sa_handler = note_signal;
        ::sigemptyset(&action.sa_mask);
        action.sa_flags = SA_RESTART;
        for (std::size_t i = 0; i < std::size(k_signals); ++i) ::sigaction(k_signals[i], &action, &m_saved[i]);
        m_thread = std::thread([this] { run(); });
    }
    ~SignalForwarder() {
        if (!m_thread.joinable()) return;
        for (std::size_t i = 0; i < std::size(k_signals); ++i) ::sigaction(k_signals[i], &m_saved[i], nullptr);
        g_signal_pipe = -1;
        const unsigned char stop = 0;
        (void)!::write(m_pipe[1], &stop, 1);
        m_thread.join();
        ::close(m_pipe[0]);
        ::close(m_pipe[1]);
    }
    SignalForwarder(const SignalForwarder&) = delete;
    SignalForwarder& operator=(const SignalForwarder&) = delete;

private:
    static constexpr int k_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

    void run() {
        for (;;) {
            pollfd fd{m_pipe[0], POLLIN, 0};
            if (::poll(&fd, 1, -1) < 0 && errno != EINTR) return;
            unsigned char signal = 0;
            while (::read(m_pipe[0], &signal, 1) == 1) {
                if (signal == 0) return;
                const auto message = fmt::format(R"({{"command":"signal","signal":{}}})", signal);
                (void)m_control.send(0x1, message.data(), message.size());
            }
        }
    }

    Connection& m_control;
    int m_pipe[2] = {-1, -1};
    struct sigaction m_saved[std::size(k_signals)]{};
    std::thread m_thread;
};

}  // namespace

ExecSecrets parse_exec_secrets(const Json& metadata) {
    const auto fds = metadata.is_object() ? metadata.value("fds", Json::object()) : Json::object();
    auto secret = [&](const char* key) {
        if (!fds.is_object() || !fds.contains(key) || !fds[key].is_string()) {
            throw Error(fmt::format("Incus started the exec without a \"{}\" stream", key),
                        "the daemon must support exec websockets (API extension container_exec)");
        }
        return fds[key].get<std::string>();
    };
    return ExecSecrets{secret("control"), secret("0"), secret("1"), secret("2")};
}

std::string websocket_target(std::string_view operation, const std::string& secret) {
    const auto slash = operation.rfind('/');
    const auto id = slash == std::string_view::npos ? operation : operation.substr(slash + 1);
    return fmt::format("/1.0/operations/{}/websocket?secret={}", id, secret);
}

void stream_exec(Transport& transport, std::string_view operation, const ExecSecrets& secrets, int in_fd, int out_fd,
                 int err_fd) {
    auto control = open(transport, websocket_target(operation, secrets.control));
    auto in = open(transport, websocket_target(operation, secrets.in));
    auto out = open(transport, websocket_target(operation, secrets.out));
    auto err = open(transport, websocket_target(operation, secrets.err));
    // The feeder waits on stdin and on this pipe, written once the output has ended.
    int stop[2] = {-1, -1};
    if (in_fd >= 0 && ::pipe2(stop, O_CLOEXEC) != 0) {
        throw Error(fmt::format("cannot stream stdin to the command: pipe: {}", std::strerror(errno)));
    }
    std::thread feeder;
    if (in_fd >= 0) {
        feeder = std::thread([&] { feed(*in, in_fd, stop[0]); });
    } else {
        in->close();  // no stdin: the command reads end-of-file at once
    }
    // The control stream carries the server's pings (reading answers them),
    // and this process's signals to the command.
    std::thread control_reader([&] { pump(*control, -1); });
    std::optional<SignalForwarder> signals;
    signals.emplace(*control);
    std::thread err_reader([&] { pump(*err, err_fd); });
    pump(*out, out_fd);
    err_reader.join();
    if (feeder.joinable()) {
        (void)!::write(stop[1], "x", 1);
        in->stream->shutdown();  // a write blocked on a command that stopped reading returns
        feeder.join();
        ::close(stop[0]);
        ::close(stop[1]);
    }
    signals.reset();
    control->stream->shutdown();
    control_reader.join();
}

}  // namespace agentctl::provider::incus
