#include "egress_proxy/server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <exception>
#include <vector>

#include <nlohmann/json.hpp>

namespace agentctl::egress_proxy {

namespace asio = boost::asio;

namespace {

using asio::redirect_error;
using asio::use_awaitable;

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

Server::Server(ProxyContext& context, tcp::acceptor acceptor, std::string policy_file, std::string resolve_file)
    : m_context(context),
      m_acceptor(std::move(acceptor)),
      m_policy_file(std::move(policy_file)),
      m_resolve_file(std::move(resolve_file)),
      m_policy_stamp(stamp_of(m_policy_file)),
      m_stop_signals(context.io, SIGTERM, SIGINT),
      m_hangup(context.io, SIGHUP),
      m_poll_timer(context.io),
      m_backoff_timer(context.io),
      m_exit_timer(context.io) {}

void Server::start() {
    asio::co_spawn(m_context.io, accept_loop(), asio::detached);
    asio::co_spawn(m_context.io, watch_policy_file(), asio::detached);
    wait_for_signal();
    wait_for_hangup();
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

asio::awaitable<void> Server::accept_loop() {
    auto backoff = std::chrono::milliseconds(0);
    while (!m_context.stopping) {
        boost::system::error_code ec;
        if (m_context.sessions.size() >= m_context.limits.max_connections) {
            // At the cap: leave further clients in the kernel's accept queue until one ends.
            m_context.slot_freed.expires_at(asio::steady_timer::time_point::max());
            co_await m_context.slot_freed.async_wait(redirect_error(use_awaitable, ec));
            continue;
        }
        tcp::socket socket(m_context.io);
        tcp::endpoint peer;  // from accept(2) itself: no getpeername(2) per connection
        co_await m_acceptor.async_accept(socket, peer, redirect_error(use_awaitable, ec));
        if (m_context.stopping) break;
        if (ec) {
            // EMFILE, ENOBUFS, ...: log and back off instead of spinning on the error.
            backoff = std::min(std::max(backoff * 2, std::chrono::milliseconds(10)), std::chrono::milliseconds(1000));
            m_context.access_log.write({{"time", utc_timestamp()},
                                        {"event", "accept-error"},
                                        {"message", ec.message()},
                                        {"backoff_ms", backoff.count()}});
            m_backoff_timer.expires_after(backoff);
            co_await m_backoff_timer.async_wait(redirect_error(use_awaitable, ec));
            continue;
        }
        backoff = std::chrono::milliseconds(0);
        std::make_shared<Session>(m_context, std::move(socket), peer)->start();
    }
}

asio::awaitable<void> Server::watch_policy_file() {
    while (!m_context.stopping) {
        boost::system::error_code ec;
        m_poll_timer.expires_after(m_context.limits.policy_poll);
        co_await m_poll_timer.async_wait(redirect_error(use_awaitable, ec));
        if (ec || m_context.stopping) break;
        if (stamp_of(m_policy_file) != m_policy_stamp) reload("policy file changed");
    }
}

void Server::reload(const char* trigger) {
    m_policy_stamp = stamp_of(m_policy_file);
    auto snapshot = load_policy_snapshot(m_policy_file);
    m_context.policy = snapshot;
    log_policy(m_context.access_log, *snapshot, trigger);
    // Open tunnels and keep-alive connections whose destination the new policy
    // no longer allows are closed now (each logs its `close` line with the reason).
    std::vector<Session*> open(m_context.sessions.begin(), m_context.sessions.end());
    std::size_t closed = 0;
    for (Session* session : open) closed += session->revalidate(*snapshot) ? 1 : 0;
    if (closed > 0) {
        m_context.access_log.write(
            {{"time", utc_timestamp()},
             {"event", "policy"},
             {"trigger", trigger},
             {"message", "closed " + std::to_string(closed) + " open connection(s) the new policy no longer allows"},
             {"closed_connections", closed}});
    }
    if (!m_resolve_file.empty() && std::string_view(trigger) == "SIGHUP") {
        try {
            m_context.resolve_map = std::make_shared<const ResolveMap>(ResolveMap::load(m_resolve_file));
        } catch (const std::exception& e) {
            m_context.access_log.write({{"time", utc_timestamp()},
                                        {"event", "resolve-file"},
                                        {"level", "error"},
                                        {"message", std::string("kept the previous map: ") + e.what()}});
        }
    }
}

void Server::shutdown(int signal_number) {
    m_context.stopping = true;
    m_context.access_log.write({{"time", utc_timestamp()},
                                {"event", "stop"},
                                {"signal", signal_number},
                                {"open_connections", m_context.sessions.size()}});
    boost::system::error_code ignored;
    m_acceptor.close(ignored);
    m_poll_timer.cancel();
    m_backoff_timer.cancel();
    m_context.slot_freed.cancel();
    m_stop_signals.cancel(ignored);
    m_hangup.cancel(ignored);
    std::vector<Session*> open(m_context.sessions.begin(), m_context.sessions.end());
    for (Session* session : open) session->close();
    // Connections unwind on their own; a lookup still in the resolver's thread
    // must not hold the exit up.
    wait_for_drain(100);
}

void Server::wait_for_drain(int ticks_left) {
    if (m_context.sessions.empty() || ticks_left == 0) {
        m_context.io.stop();
        return;
    }
    m_exit_timer.expires_after(std::chrono::milliseconds(10));
    m_exit_timer.async_wait([this, ticks_left](const boost::system::error_code&) { wait_for_drain(ticks_left - 1); });
}

}  // namespace agentctl::egress_proxy
