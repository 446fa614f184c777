#include "egress_proxy/server.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include <nlohmann/json.hpp>

#include "egress_proxy/resident_memory.hpp"

namespace agentctl::egress_proxy {

namespace asio = boost::asio;

namespace {

using asio::redirect_error;
using asio::use_awaitable;

// Connections loop 0 accepts in a row before it lets its other work run.
constexpr std::size_t k_accepts_per_turn = 16;

// accept(2), the new socket close-on-exec and non-blocking: a tunnel's
// splice(2) needs the latter, and Asio, which would set it at its first wait,
// may never wait on the socket. One call on Linux; macOS has no accept4(2).
int accept_connection(int listener, sockaddr_storage& address, socklen_t& length) {
    auto* peer = reinterpret_cast<sockaddr*>(&address);
#if defined(__linux__)
    return ::accept4(listener, peer, &length, SOCK_CLOEXEC | SOCK_NONBLOCK);
#else
    const int fd = ::accept(listener, peer, &length);
    if (fd >= 0) {
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    return fd;
#endif
}

}  // namespace

void log_policy(AccessLog& log, const PolicySnapshot& snapshot, const char* trigger) {
    nlohmann::json entry{{"time", utc_timestamp()}, {"event", "policy"}, {"trigger", trigger}};
    if (snapshot.usable) {
        entry["message"] = "policy loaded: " + std::to_string(snapshot.policy.allow.size()) + " allow rule(s)" +
                           (snapshot.policy.allow_lan ? ", LAN allowed" : "") +
                           (snapshot.policy.enabled ? "" : ", POLICY DISABLED (unrestricted)");
        entry["rules"] = snapshot.policy.allow.size();
    } else {
        entry["message"] = "DENYING ALL CONNECTIONS: " + snapshot.problem;
        entry["level"] = "error";
        std::fprintf(stderr, "agentctl: egress proxy: denying all connections: %s\n", snapshot.problem.c_str());
    }
    entry["host_addresses"] = snapshot.host_addresses.size();
    log.write(entry);
}

Server::Loop::Loop(ProxyShared& shared, std::size_t index, std::size_t spare_pipes)
    : context(io, shared, index, spare_pipes), io(1), exit_timer(io), work(asio::make_work_guard(io)) {}

std::vector<std::unique_ptr<Server::Loop>> Server::make_loops(ProxyShared& shared, std::size_t count) {
    count = std::max<std::size_t>(count, 1);
    std::vector<std::unique_ptr<Loop>> loops;
    for (std::size_t i = 0; i < count; ++i)
        loops.push_back(std::make_unique<Loop>(shared, i, std::max<std::size_t>(k_spare_pipes / count, 1)));
    return loops;
}

Server::Server(ProxyShared& shared, std::size_t loops, std::string policy_file, std::string resolve_file)
    : m_shared(shared),
      m_loops(make_loops(shared, loops)),
      m_policy_file(std::move(policy_file)),
      m_resolve_file(std::move(resolve_file)),
      m_policy_stamp(stamp_of(m_policy_file)),
      m_stop_signals(main_io(), SIGTERM, SIGINT),
      m_hangup(main_io(), SIGHUP),
      m_poll_timer(main_io()),
      m_backoff_timer(main_io()),
      m_grant_timer(main_io()),
      m_slot_freed(main_io()) {
    m_shared.slot_freed = [this] { asio::post(main_io(), [this] { m_slot_freed.cancel(); }); };
    m_shared.budget_spent = [this](const std::string& host, std::uint16_t port) { end_budget_spent(host, port); };
}

Server::~Server() {
    // Normally run() has returned after a shutdown; after an exception the
    // other loops may still run: stop them before their state goes.
    m_shared.stopping = true;
    for (auto& loop : m_loops) loop->io.stop();
    for (auto& thread : m_threads) thread.join();
}

void Server::start(tcp::acceptor acceptor) {
    m_acceptor.emplace(std::move(acceptor));
    // Start-up ran code all over the executable once (option parsing, the
    // static initialisation of the whole binary, the policy loader).
    release_unwritten_file_pages();
    m_quiet.accepted = m_quiet.released = m_shared.next_id.load(std::memory_order_relaxed);
    m_quiet.since = std::chrono::steady_clock::now();
    asio::co_spawn(main_io(), accept_loop(false), asio::detached);
    asio::co_spawn(main_io(), watch_policy_file(), asio::detached);
    arm_grant_timer(*m_shared.policy.get());
    wait_for_signal();
    wait_for_hangup();
}

void Server::run() {
    for (std::size_t i = 1; i < m_loops.size(); ++i) {
        m_threads.emplace_back([loop = m_loops[i].get()] {
            try {
                loop->io.run();
            } catch (const std::exception& e) {
                // A loop that fails leaves its connections unserved: stop the
                // whole proxy the orderly way (fail closed: no way out).
                std::fprintf(stderr, "agentctl: egress proxy: event loop failed: %s\n", e.what());
                ::kill(::getpid(), SIGTERM);
            }
        });
    }
    main_io().run();
    for (auto& thread : m_threads) thread.join();
    m_threads.clear();
}

bool Server::drained() const {
    return std::all_of(m_loops.begin(), m_loops.end(), [](const auto& loop) { return loop->context.sessions.empty(); });
}

void Server::wait_for_signal() {
    m_stop_signals.async_wait([this](const boost::system::error_code& ec, int signal_number) {
        if (!ec) shutdown(signal_number);
    });
}

void Server::wait_for_hangup() {
    m_hangup.async_wait([this](const boost::system::error_code& ec, int) {
        if (ec) return;
        reload("SIGHUP");
        wait_for_hangup();
    });
}

void Server::start_session(ProxyContext& context, tcp::socket socket, const tcp::endpoint& peer) {
    auto session = std::make_shared<Session>(context, std::move(socket), peer);
    if (context.shared.stopping) {
        session->close();  // accepted just before the shutdown reached this loop
    } else {
        session->start();
    }
}

Server::Loop& Server::least_busy_loop() {
    Loop* chosen = m_loops.front().get();
    std::size_t fewest = chosen->context.connections.load(std::memory_order_relaxed);
    for (auto& loop : m_loops) {
        const std::size_t count = loop->context.connections.load(std::memory_order_relaxed);
        if (count < fewest) {
            chosen = loop.get();
            fewest = count;
        }
    }
    return *chosen;
}

asio::awaitable<void> Server::accept_loop(bool wait_first) {
    auto backoff = std::chrono::milliseconds(0);
    const int listener = m_acceptor->native_handle();  // non-blocking (run_egress_proxy)
    std::size_t accepted_in_a_row = 0;
    if (wait_first) {
        // A hand-off from an idle loop 0: the connection just taken was most
        // likely the only one queued, so wait rather than ask first (the wait
        // reports one already queued as well; on shutdown it fails, and the
        // loop below ends).
        boost::system::error_code ignored;
        co_await m_acceptor->async_wait(tcp::acceptor::wait_read, redirect_error(use_awaitable, ignored));
    }
    while (!m_shared.stopping) {
        boost::system::error_code ec;
        if (m_shared.open_connections.load() >= m_shared.limits.max_connections) {
            // At the cap: leave further clients in the kernel's accept queue until one ends.
            m_slot_freed.expires_at(asio::steady_timer::time_point::max());
            co_await m_slot_freed.async_wait(redirect_error(use_awaitable, ec));
            continue;
        }
        // accept(2) itself, so that the loop is chosen once the connection is
        // there, and the peer's address comes with it (no getpeername(2)).
        sockaddr_storage address{};
        socklen_t length = sizeof address;
        const int fd = accept_connection(listener, address, length);
        if (fd < 0) {
            const int error = errno;
            std::string why;
            if (error == EAGAIN || error == EWOULDBLOCK) {
                accepted_in_a_row = 0;
                co_await m_acceptor->async_wait(tcp::acceptor::wait_read, redirect_error(use_awaitable, ec));
                if (!ec || m_shared.stopping) continue;  // on shutdown the acceptor is closed
                why = ec.message();
            } else if (error == EINTR || error == ECONNABORTED) {
                continue;  // that client is gone; take the next
            } else {
                why = std::strerror(error);
            }
            // EMFILE, ENOBUFS, ...: log and back off instead of spinning on the error.
            backoff = std::min(std::max(backoff * 2, std::chrono::milliseconds(10)), std::chrono::milliseconds(1000));
            m_shared.access_log.write({{"time", utc_timestamp()},
                                       {"event", "accept-error"},
                                       {"message", why},
                                       {"backoff_ms", backoff.count()}});
            m_backoff_timer.expires_after(backoff);
            co_await m_backoff_timer.async_wait(redirect_error(use_awaitable, ec));
            continue;
        }
        backoff = std::chrono::milliseconds(0);
        tcp::endpoint peer;
        if (length > peer.capacity()) {  // not an IPv4 or IPv6 peer: cannot happen on a TCP listener
            ::close(fd);
            continue;
        }
        std::memcpy(peer.data(), &address, length);
        peer.resize(length);
        // The loop serving the fewest connections takes it; loop 0 (this one)
        // on a tie, so a lone connection costs no hand-off between threads.
        // The socket is registered with that loop's reactor here.
        Loop& loop = least_busy_loop();
        tcp::socket socket(loop.io);
        socket.assign(peer.protocol(), fd, ec);
        if (ec) {
            ::close(fd);
            continue;
        }
        m_shared.open_connections.fetch_add(1);
        const bool loop_was_idle = loop.context.connections.fetch_add(1, std::memory_order_relaxed) == 0;
        const bool on_this_loop = &loop == m_loops.front().get();
        if (on_this_loop && loop_was_idle) {
            // Loop 0 (this one) has nothing else to serve: this coroutine serves
            // the connection itself, at once, and hands accepting on to a fresh
            // one, which runs once this one waits. The client's head is read and
            // answered before the listener is polled again, and without a round
            // through the event loop first. (Under load, connections go the
            // usual way, so that accepting keeps up for the other loops.)
            asio::co_spawn(main_io(), accept_loop(true), asio::detached);
            auto session = std::make_shared<Session>(loop.context, std::move(socket), peer);
            co_await session->serve();
            co_return;
        }
        if (on_this_loop) {
            start_session(loop.context, std::move(socket), peer);
        } else {
            asio::post(loop.io, [&context = loop.context, socket = std::move(socket), peer]() mutable {
                start_session(context, std::move(socket), peer);
            });
        }
        if (++accepted_in_a_row % k_accepts_per_turn == 0) {
            // A long accept queue does not keep loop 0's own connections waiting.
            co_await asio::post(main_io(), use_awaitable);
        }
    }
}

asio::awaitable<void> Server::watch_policy_file() {
    while (!m_shared.stopping) {
        boost::system::error_code ec;
        m_poll_timer.expires_after(m_shared.limits.policy_poll);
        co_await m_poll_timer.async_wait(redirect_error(use_awaitable, ec));
        if (ec || m_shared.stopping) break;
        m_shared.refusal_log.tick();  // the summary of a flood's last second
        m_shared.budgets.save_if_changed();
        if (stamp_of(m_policy_file) != m_policy_stamp) reload("policy file changed");
        release_when_idle();
    }
}

void Server::release_when_idle() {
    const auto now = std::chrono::steady_clock::now();
    const auto accepted = m_shared.next_id.load(std::memory_order_relaxed);
    if (m_shared.open_connections.load() != 0 || accepted != m_quiet.accepted) {
        m_quiet.accepted = accepted;
        m_quiet.since = now;
        return;
    }
    if (accepted == m_quiet.released || now - m_quiet.since < m_shared.limits.idle_release) return;
    release_unwritten_file_pages();
    m_quiet.released = accepted;
}

void Server::reload(const char* trigger) {
    m_policy_stamp = stamp_of(m_policy_file);
    auto snapshot = load_policy_snapshot(m_policy_file);
    // In force for every new decision from here on; a decision that started
    // under the old snapshot checks the new one once connected (Session::decide_and_connect).
    m_shared.policy.set(snapshot);
    arm_grant_timer(*snapshot);
    m_shared.budgets.configure(snapshot->policy.budgets, snapshot->policy.default_budget);
    log_policy(m_shared.access_log, *snapshot, trigger);
    // Each loop closes its own open tunnels and keep-alive connections whose
    // destination the new policy no longer allows (each logs its `close` line
    // with the reason); the last loop to finish logs how many.
    struct Tally {
        std::atomic<std::size_t> loops_left;
        std::atomic<std::size_t> closed{0};
        std::string trigger;
    };
    auto tally = std::make_shared<Tally>();
    tally->loops_left = m_loops.size();
    tally->trigger = trigger;
    for (auto& loop : m_loops) {
        asio::post(loop->io, [&shared = m_shared, &context = loop->context, snapshot, tally] {
            std::vector<Session*> open(context.sessions.begin(), context.sessions.end());
            std::size_t closed = 0;
            for (Session* session : open) closed += session->revalidate(*snapshot) ? 1 : 0;
            tally->closed += closed;
            if (tally->loops_left.fetch_sub(1) != 1) return;
            const std::size_t total = tally->closed.load();
            if (total == 0) return;
            shared.access_log.write(
                {{"time", utc_timestamp()},
                 {"event", "policy"},
                 {"trigger", tally->trigger},
                 {"message", "closed " + std::to_string(total) + " open connection(s) the new policy no longer allows"},
                 {"closed_connections", total}});
        });
    }
    if (!m_resolve_file.empty() && std::string_view(trigger) == "SIGHUP") {
        try {
            m_shared.resolve_map.set(std::make_shared<const ResolveMap>(ResolveMap::load(m_resolve_file)));
        } catch (const std::exception& e) {
            m_shared.access_log.write({{"time", utc_timestamp()},
                                       {"event", "resolve-file"},
                                       {"level", "error"},
                                       {"message", std::string("kept the previous map: ") + e.what()}});
        }
    }
}

void Server::arm_grant_timer(const PolicySnapshot& snapshot) {
    m_grant_timer.cancel();
    if (snapshot.next_expiry == 0 || m_shared.stopping) return;
    m_grant_timer.expires_at(std::chrono::system_clock::time_point(std::chrono::seconds(snapshot.next_expiry)));
    m_grant_timer.async_wait([this](const boost::system::error_code& ec) {
        // The reload leaves the ended grant out and closes what it allowed.
        if (!ec && !m_shared.stopping) reload("grant expired");
    });
}

void Server::end_budget_spent(const std::string& host, std::uint16_t port) {
    for (auto& loop : m_loops) {
        asio::post(loop->io, [&context = loop->context, host, port] {
            std::vector<Session*> open(context.sessions.begin(), context.sessions.end());
            for (Session* session : open) session->end_for_budget(host, port);
        });
    }
    asio::post(main_io(), [this] { m_shared.budgets.save_if_changed(); });
}

void Server::shutdown(int signal_number) {
    m_shared.stopping = true;
    m_shared.access_log.write({{"time", utc_timestamp()},
                               {"event", "stop"},
                               {"signal", signal_number},
                               {"open_connections", m_shared.open_connections.load()}});
    boost::system::error_code ignored;
    m_acceptor->close(ignored);
    m_poll_timer.cancel();
    m_backoff_timer.cancel();
    m_grant_timer.cancel();
    m_slot_freed.cancel();
    m_stop_signals.cancel(ignored);
    m_hangup.cancel(ignored);
    for (auto& loop : m_loops) {
        asio::post(loop->io, [&loop = *loop] {
            std::vector<Session*> open(loop.context.sessions.begin(), loop.context.sessions.end());
            for (Session* session : open) session->close();
            // Connections unwind on their own; a lookup still in the resolver's
            // thread must not hold the exit up.
            wait_for_drain(loop, 100);
        });
    }
}

void Server::wait_for_drain(Loop& loop, int ticks_left) {
    if (loop.context.sessions.empty() || ticks_left == 0) {
        loop.io.stop();
        return;
    }
    loop.exit_timer.expires_after(std::chrono::milliseconds(10));
    loop.exit_timer.async_wait(
        [&loop, ticks_left](const boost::system::error_code&) { wait_for_drain(loop, ticks_left - 1); });
}

}  // namespace agentctl::egress_proxy
