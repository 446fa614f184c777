// CONNECT: answer 200, then move bytes both ways. On Linux with splice(2)
// through a small kernel pipe per direction, so payload never enters user
// space; elsewhere (macOS, where the Lima provider runs the proxy) through a
// bounded user-space buffer. Either way a direction only reads again once what
// it read has been written to the destination (backpressure).
#include <utility>  // before Asio (awaitable.hpp needs std::exchange)

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <tuple>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "egress_proxy/session.hpp"

namespace agentctl::egress_proxy {

namespace asio = boost::asio;

namespace {

using asio::redirect_error;
using asio::use_awaitable;

}  // namespace

#if defined(__linux__) && !defined(AGENTCTL_PORTABLE_RELAY)

namespace {

constexpr std::size_t k_splice_chunk = 1 << 20;
// A new pipe has the kernel's default capacity: 16 slots, each holding one
// piece of a socket buffer, so often only ~32 KiB of TCP payload. Plenty for
// request and response heads and small bodies. A direction that reads
// k_bulk_read_bytes or more in one splice is moving bulk data and gets a 1 MiB
// pipe (256 slots): a splice then moves about four times as much per call,
// which measured about a quarter less proxy CPU per MiB (docs/benchmarks-history.md,
// "Fourth pass"). Growing is best effort: without CAP_SYS_RESOURCE the kernel
// refuses it past fs.pipe-max-size or once the user's pipes pass
// fs.pipe-user-pages-soft (the proxy runs as nobody, and the limit counts a
// pipe's capacity, full or not), and the pipe keeps its size.
constexpr std::size_t k_default_pipe_bytes = 64 * 1024;
constexpr std::size_t k_bulk_read_bytes = 16 * 1024;
constexpr int k_bulk_pipe_bytes = 1024 * 1024;
// Grown pipes one proxy holds at most (16 x 256 slots: a quarter of the
// default fs.pipe-user-pages-soft); further bulk directions keep the default size.
constexpr std::size_t k_max_bulk_pipes = 16;

// A pipe taken on first use from the loop's spare pipes (or created). A
// default-size pipe goes back to the spares when its direction waits or ends
// empty; a grown one stays with its direction while it waits (a stream with
// pauses is not resized on every read) and is closed when the direction ends.
// Either is closed when it still holds bytes, or when descriptors run short.
class Pipe {
public:
    explicit Pipe(ProxyContext& context) : m_context(context) {}
    ~Pipe() { release(); }
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;

    bool ensure() {
        if (m_fds[0] >= 0) return true;
        if (!m_context.spare_pipes.empty()) {
            std::tie(m_fds[0], m_fds[1]) = m_context.spare_pipes.back();
            m_context.spare_pipes.pop_back();
            return true;
        }
        return ::pipe2(m_fds, O_NONBLOCK | O_CLOEXEC) == 0;
    }
    // Called with the size of each read: a bulk-sized one grows the pipe,
    // once per pipe, while the proxy holds fewer than k_max_bulk_pipes.
    void note_read(std::size_t bytes) {
        if (m_grow_tried || bytes < k_bulk_read_bytes || !reserve_bulk_pipe()) return;
        m_grow_tried = true;  // whether or not the kernel agrees
        int granted = ::fcntl(m_fds[1], F_SETPIPE_SZ, k_bulk_pipe_bytes);
        if (granted > static_cast<int>(k_default_pipe_bytes)) {
            m_capacity = static_cast<std::size_t>(granted);
        } else {
            m_context.shared.bulk_pipes.fetch_sub(1);
        }
    }
    // What the pipe holds when full (a pipe the kernel made smaller under the
    // user's limit holds less; a top-up then finds it full, which is harmless).
    [[nodiscard]] std::size_t capacity() const { return m_capacity; }
    // A waiting direction keeps a grown pipe unless descriptors run short.
    void release_while_waiting() {
        if (!grown() || pressure()) release(true);
    }
    // `empty`: nothing is left in the pipe, so another relay may reuse it.
    void release(bool empty = false) {
        if (m_fds[0] < 0) return;
        if (empty && !grown() && !pressure() && m_context.spare_pipes.size() < m_context.spare_pipe_limit) {
            m_context.spare_pipes.emplace_back(m_fds[0], m_fds[1]);
        } else {
            ::close(m_fds[0]);
            ::close(m_fds[1]);
            if (grown()) m_context.shared.bulk_pipes.fetch_sub(1);
        }
        m_fds[0] = m_fds[1] = -1;
        m_capacity = k_default_pipe_bytes;
        m_grow_tried = false;
    }
    [[nodiscard]] int read_end() const { return m_fds[0]; }
    [[nodiscard]] int write_end() const { return m_fds[1]; }

private:
    [[nodiscard]] bool grown() const { return m_capacity != k_default_pipe_bytes; }
    [[nodiscard]] bool pressure() const {
        return m_context.shared.open_connections.load(std::memory_order_relaxed) * 2 > m_context.limits.max_connections;
    }
    // One of the proxy's k_max_bulk_pipes, across its event loops; false when all are taken.
    bool reserve_bulk_pipe() {
        auto& count = m_context.shared.bulk_pipes;
        std::size_t held = count.load(std::memory_order_relaxed);
        do {
            if (held >= k_max_bulk_pipes) return false;
        } while (!count.compare_exchange_weak(held, held + 1));
        return true;
    }

    ProxyContext& m_context;
    int m_fds[2] = {-1, -1};
    std::size_t m_capacity = k_default_pipe_bytes;
    bool m_grow_tried = false;
};

constexpr unsigned k_splice_flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;

}  // namespace

#endif

asio::awaitable<void> Session::handle_connect(const RequestTarget& target,
                                              std::shared_ptr<const PolicySnapshot> snapshot,
                                              std::optional<policy::Decision> decision) {
    auto self = shared_from_this();
    if (!co_await decide_and_connect("CONNECT", target, std::move(snapshot), std::move(decision))) {
        close();
        co_return;
    }
    static constexpr std::string_view k_established = "HTTP/1.1 200 Connection established\r\n\r\n";
    boost::system::error_code ec;
    co_await write_all(m_client, asio::buffer(k_established), ec);
    // (The shared pointer is copied only for a connection that is terminated.)
    if (const auto& intercept = m_context.shared.intercept;
        !ec && intercept && intercept->secrets()->binds(target.host, target.port)) {
        co_await intercept_tls(intercept, target.host);
        co_return;
    }
    set_nodelay(m_upstream);  // before the first byte goes upstream (decide_and_connect leaves it to here)
    if (!ec && m_buffer.size() > 0) {
        // Bytes the client sent right behind its CONNECT head (e.g. a TLS ClientHello).
        m_bytes_up += co_await write_all(m_upstream, m_buffer.data(), ec);
    }
    m_buffer = boost::beast::flat_buffer();  // release the head buffer for the tunnel's lifetime
    charge_budget();
    if (ec || m_ending == record::Ending::Budget) {
        close_upstream("client write failed");
        close();
        co_return;
    }
    start_tunnel();
}

void Session::start_tunnel() {
    m_phase = Phase::Tunnel;
    set_deadline(m_context.limits.idle_timeout);
    // Both descriptors are already O_NONBLOCK (the accept loop and socket(2)
    // made them so), and splice(2) needs nothing more.
    m_relays_running = 2;
    auto self = shared_from_this();
    asio::co_spawn(
        m_context.io,
        [self]() { return self->relay(self->m_client, self->m_upstream, self->m_bytes_up, self->m_budget.get()); },
        [self](std::exception_ptr) { self->relay_finished(); });
    asio::co_spawn(
        m_context.io, [self]() { return self->relay(self->m_upstream, self->m_client, self->m_bytes_down, nullptr); },
        [self](std::exception_ptr) { self->relay_finished(); });
}

void Session::pass_fin(tcp::socket& to) {
    // Half-close while the other direction still runs: it may go on sending.
    // When it has ended, relay_finished closes both sockets next, and closing
    // `to` sends the same FIN (its receive queue is empty: the other direction
    // read it to its end), so the shutdown(2) would be one call too many.
    if (m_relays_running < 2) return;
    boost::system::error_code ignored;
    to.shutdown(tcp::socket::shutdown_send, ignored);
}

void Session::relay_finished() {
    if (--m_relays_running > 0) return;
    clear_deadline();
    close_upstream("tunnel closed");
    close();
}

#if defined(__linux__) && !defined(AGENTCTL_PORTABLE_RELAY)

asio::awaitable<void> Session::relay(tcp::socket& from, tcp::socket& to, std::uint64_t& counter,
                                     BudgetCounter* budget) {
    Pipe pipe(m_context);
    std::size_t in_pipe = 0;
    // Whether `from` may have data. A direction starts by waiting: at the
    // start of a tunnel there is mostly nothing to read yet, and the wait
    // completes at once for bytes that are already there (e.g. a server that
    // speaks first), so a first splice(2) would mostly just fail with EAGAIN.
    bool source_ready = false;
    bool source_eof = false;  // the source's FIN, read while the pipe still held bytes
    boost::system::error_code ec;
    for (;;) {
        if (!from.is_open() || !to.is_open()) break;
        if (in_pipe == 0) {
            if (!source_ready) {
                // A waiting direction holds no default-size pipe: its empty pipe
                // goes back to the spare ones (closed under descriptor pressure),
                // so an idle tunnel holds its two sockets and nothing else; one
                // that moved bulk data may keep its grown pipe (Pipe, above).
                pipe.release_while_waiting();
                co_await from.async_wait(tcp::socket::wait_read, redirect_error(use_awaitable, ec));
                if (ec || !from.is_open() || !to.is_open()) break;
                source_ready = true;
            }
            if (!pipe.ensure()) break;
            ssize_t n =
                ::splice(from.native_handle(), nullptr, pipe.write_end(), nullptr, k_splice_chunk, k_splice_flags);
            if (n > 0) {
                in_pipe = static_cast<std::size_t>(n);
                pipe.note_read(in_pipe);
            } else if (n == 0) {
                pipe.release(true);
                pass_fin(to);
                co_return;
            } else if (errno == EAGAIN) {
                source_ready = false;
                continue;
            } else if (errno == EINTR) {
                continue;
            } else {
                break;  // reset or other error: end both directions
            }
        }
        while (in_pipe > 0) {
            std::size_t length = in_pipe;
            if (budget != nullptr) {
                // Never past the budget: what is left of it goes, then the tunnel ends.
                const auto room = budget->remaining();
                if (room == 0) {
                    budget_spent();
                    break;
                }
                length = static_cast<std::size_t>(std::min<std::uint64_t>(length, room));
            }
            ssize_t m = ::splice(pipe.read_end(), nullptr, to.native_handle(), nullptr, length, k_splice_flags);
            if (m > 0) {
                in_pipe -= static_cast<std::size_t>(m);
                counter += static_cast<std::uint64_t>(m);
                if (budget != nullptr) {
                    budget->used.fetch_add(static_cast<std::uint64_t>(m), std::memory_order_relaxed);
                    m_charged += static_cast<std::uint64_t>(m);
                }
                m_deadline = Clock::now() + m_context.limits.idle_timeout;
            } else if (m < 0 && errno == EAGAIN) {
                // The destination is full: top the pipe up from the source before
                // sleeping, so the sender's window keeps opening while we wait.
                // EAGAIN here may mean a full pipe as well as an empty socket, so
                // it does not clear source_ready (the next read finds out).
                if (source_ready && !source_eof && in_pipe < pipe.capacity()) {
                    ssize_t more = ::splice(from.native_handle(), nullptr, pipe.write_end(), nullptr, k_splice_chunk,
                                            k_splice_flags);
                    if (more > 0) {
                        in_pipe += static_cast<std::size_t>(more);
                        continue;
                    }
                    if (more == 0) source_eof = true;
                }
                co_await to.async_wait(tcp::socket::wait_write, redirect_error(use_awaitable, ec));
                if (ec || !to.is_open()) break;
            } else if (m < 0 && errno == EINTR) {
                continue;
            } else {
                break;
            }
        }
        if (in_pipe > 0) break;
        if (source_eof) {
            // Half-close seen while topping up: pass the FIN on now that the pipe is empty.
            pipe.release(true);
            pass_fin(to);
            co_return;
        }
    }
    pipe.release(in_pipe == 0);
    // An error in either direction ends the tunnel.
    boost::system::error_code ignored;
    from.close(ignored);
    to.close(ignored);
}

#else

// The portable relay: read what is there into a fixed buffer, write all of it,
// repeat. The buffer is the only payload memory a direction holds.
asio::awaitable<void> Session::relay(tcp::socket& from, tcp::socket& to, std::uint64_t& counter,
                                     BudgetCounter* budget) {
    std::array<char, 16 * 1024> buffer{};
    boost::system::error_code ec;
    for (;;) {
        if (!from.is_open() || !to.is_open()) break;
        std::size_t n = co_await from.async_read_some(asio::buffer(buffer), redirect_error(use_awaitable, ec));
        if (ec == asio::error::eof) {
            pass_fin(to);
            co_return;
        }
        if (ec) break;
        std::size_t length = n;
        if (budget != nullptr) {
            // Never past the budget: what is left of it goes, then the tunnel ends.
            length = static_cast<std::size_t>(std::min<std::uint64_t>(length, budget->remaining()));
        }
        co_await asio::async_write(to, asio::buffer(buffer.data(), length), redirect_error(use_awaitable, ec));
        if (ec) break;
        counter += length;
        if (budget != nullptr) {
            budget->used.fetch_add(length, std::memory_order_relaxed);
            m_charged += length;
            if (length < n) {
                budget_spent();
                break;
            }
        }
        m_deadline = Clock::now() + m_context.limits.idle_timeout;
    }
    boost::system::error_code ignored;
    from.close(ignored);
    to.close(ignored);
}

#endif

}  // namespace agentctl::egress_proxy
