// The listener: accepts connections up to the cap, reloads the policy on
// SIGHUP or when its file changes, and shuts down cleanly on SIGTERM/SIGINT.
#pragma once

#include "egress_proxy/proxy_context.hpp"
#include "egress_proxy/session.hpp"

#include <boost/asio/signal_set.hpp>

namespace agentctl::egress_proxy {

class Server {
public:
    // `acceptor` is already listening. `context.policy` and `context.resolve_map` are set.
    Server(ProxyContext& context, tcp::acceptor acceptor, std::string policy_file, std::string resolve_file);

    // Starts accepting and watching; returns immediately (the io_context runs it).
    void start();

private:
    boost::asio::awaitable<void> accept_loop();
    boost::asio::awaitable<void> watch_policy_file();
    void reload(const char* trigger);
    void shutdown(int signal_number);
    void wait_for_drain(int ticks_left);
    void wait_for_signal();
    void wait_for_hangup();

    ProxyContext& m_context;
    tcp::acceptor m_acceptor;
    std::string m_policy_file;
    std::string m_resolve_file;
    FileStamp m_policy_stamp;
    boost::asio::signal_set m_stop_signals;
    boost::asio::signal_set m_hangup;
    boost::asio::steady_timer m_poll_timer;
    boost::asio::steady_timer m_backoff_timer;
    boost::asio::steady_timer m_exit_timer;
};

// Writes the `policy` log line for a freshly loaded snapshot (loudly when it
// is unusable: then everything is refused), and mirrors a problem on stderr.
void log_policy(AccessLog& log, const PolicySnapshot& snapshot, const char* trigger);

}  // namespace agentctl::egress_proxy
