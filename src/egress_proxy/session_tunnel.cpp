// CONNECT: answer 200, then move bytes both ways. On Linux with splice(2)
// through a small kernel pipe per direction, so payload never enters user
// space; elsewhere (macOS, where the Lima provider runs the proxy) through a
// bounded user-space buffer. Either way a direction only reads again once what
// it read has been written to the destination (backpressure).
#include <utility>  // before Asio (awaitable.hpp needs std::exchange)

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>

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
constexpr int k_pipe_bytes = 256 * 1024;

// A pipe created on first use and closed with the relay.
class Pipe {
public:
    Pipe() = default;
    ~Pipe() { release(); }
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;

    bool ensure() {
        if (m_fds[0] >= 0) return true;
        if (::pipe2(m_fds, O_NONBLOCK | O_CLOEXEC) != 0) return false;
        ::fcntl(m_fds[1], F_SETPIPE_SZ, k_pipe_bytes);  // best effort: fewer splice calls per MiB
        return true;
    }
    void release() {
        if (m_fds[0] < 0) return;
        ::close(m_fds[0]);
        ::close(m_fds[1]);
        m_fds[0] = m_fds[1] = -1;
    }
    [[nodiscard]] int read_end() const { return m_fds[0]; }
    [[nodiscard]] int write_end() const { return m_fds[1]; }

private:
    int m_fds[2] = {-1, -1};
};

constexpr unsigned k_splice_flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;

}  // namespace

#endif

asio::awaitable<void> Session::handle_connect(const RequestTarget& target) {
    auto self = shared_from_this();
    if (!co_await decide_and_connect("CONNECT", target)) {
        close();
        co_return;
    }
    static constexpr std::string_view k_established = "HTTP/1.1 200 Connection established\r\n\r\n";
    boost::system::error_code ec;
    co_await asio::async_write(m_client, asio::buffer(k_established), redirect_error(use_awaitable, ec));
    if (!ec && m_buffer.size() > 0) {
        // Bytes the client sent right behind its CONNECT head (e.g. a TLS ClientHello).
        auto n = co_await asio::async_write(m_upstream, m_buffer.data(), redirect_error(use_awaitable, ec));
        m_bytes_up += n;
    }
    m_buffer = boost::beast::flat_buffer();  // release the head buffer for the tunnel's lifetime
    if (ec) {
        close_upstream("client write failed");
        close();
        co_return;
    }
    start_tunnel();
}

void Session::start_tunnel() {
    m_phase = Phase::Tunnel;
    set_deadline(m_context.limits.idle_timeout);
    boost::system::error_code ignored;
    m_client.native_non_blocking(true, ignored);
    m_upstream.native_non_blocking(true, ignored);
    m_relays_running = 2;
    auto self = shared_from_this();
    asio::co_spawn(
        m_context.io, [self]() { return self->relay(self->m_client, self->m_upstream, self->m_bytes_up); },
        [self](std::exception_ptr) { self->relay_finished(); });
    asio::co_spawn(
        m_context.io, [self]() { return self->relay(self->m_upstream, self->m_client, self->m_bytes_down); },
        [self](std::exception_ptr) { self->relay_finished(); });
}

void Session::relay_finished() {
    if (--m_relays_running > 0) return;
    clear_deadline();
    close_upstream("tunnel closed");
    close();
}

#if defined(__linux__) && !defined(AGENTCTL_PORTABLE_RELAY)

asio::awaitable<void> Session::relay(tcp::socket& from, tcp::socket& to, std::uint64_t& counter) {
    Pipe pipe;
    std::size_t in_pipe = 0;
    // Whether `from` has data: probed before the first wait, because a
    // readiness edge that arrived before the wait was registered is not
    // reported again (edge-triggered epoll), e.g. a server that speaks first.
    enum class Source { Unknown, Empty, Ready } source = Source::Unknown;
    boost::system::error_code ec;
    for (;;) {
        if (!from.is_open() || !to.is_open()) break;
        if (in_pipe == 0) {
            if (source == Source::Unknown) {
                char probe = 0;
                ssize_t p = ::recv(from.native_handle(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
                if (p < 0 && errno != EAGAIN && errno != EINTR) break;
                source = p < 0 ? Source::Empty : Source::Ready;
            }
            if (source == Source::Empty) {
                // Under descriptor pressure a waiting direction gives its pipe
                // back; otherwise it keeps it for the next burst.
                if (m_context.sessions.size() * 2 > m_context.limits.max_connections) pipe.release();
                co_await from.async_wait(tcp::socket::wait_read, redirect_error(use_awaitable, ec));
                if (ec || !from.is_open() || !to.is_open()) break;
                source = Source::Ready;
            }
            if (!pipe.ensure()) break;
            ssize_t n =
                ::splice(from.native_handle(), nullptr, pipe.write_end(), nullptr, k_splice_chunk, k_splice_flags);
            if (n > 0) {
                in_pipe = static_cast<std::size_t>(n);
            } else if (n == 0) {
                // Half-close: pass the FIN on and let the other direction finish.
                to.shutdown(tcp::socket::shutdown_send, ec);
                co_return;
            } else if (errno == EAGAIN) {
                source = Source::Empty;
                continue;
            } else if (errno == EINTR) {
                continue;
            } else {
                break;  // reset or other error: end both directions
            }
        }
        while (in_pipe > 0) {
            ssize_t m = ::splice(pipe.read_end(), nullptr, to.native_handle(), nullptr, in_pipe, k_splice_flags);
            if (m > 0) {
                in_pipe -= static_cast<std::size_t>(m);
                counter += static_cast<std::uint64_t>(m);
                m_deadline = Clock::now() + m_context.limits.idle_timeout;
            } else if (m < 0 && errno == EAGAIN) {
                co_await to.async_wait(tcp::socket::wait_write, redirect_error(use_awaitable, ec));
                if (ec || !to.is_open()) break;
            } else if (m < 0 && errno == EINTR) {
                continue;
            } else {
                break;
            }
        }
        if (in_pipe > 0) break;
    }
    // An error in either direction ends the tunnel.
    boost::system::error_code ignored;
    from.close(ignored);
    to.close(ignored);
}

#else

// The portable relay: read what is there into a fixed buffer, write all of it,
// repeat. The buffer is the only payload memory a direction holds.
asio::awaitable<void> Session::relay(tcp::socket& from, tcp::socket& to, std::uint64_t& counter) {
    std::array<char, 16 * 1024> buffer{};
    boost::system::error_code ec;
    for (;;) {
        if (!from.is_open() || !to.is_open()) break;
        std::size_t n = co_await from.async_read_some(asio::buffer(buffer), redirect_error(use_awaitable, ec));
        if (ec == asio::error::eof) {
            // Half-close: pass the FIN on and let the other direction finish.
            to.shutdown(tcp::socket::shutdown_send, ec);
            co_return;
        }
        if (ec) break;
        co_await asio::async_write(to, asio::buffer(buffer.data(), n), redirect_error(use_awaitable, ec));
        if (ec) break;
        counter += n;
        m_deadline = Clock::now() + m_context.limits.idle_timeout;
    }
    boost::system::error_code ignored;
    from.close(ignored);
    to.close(ignored);
}

#endif

}  // namespace agentctl::egress_proxy
