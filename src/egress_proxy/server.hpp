// The listener and the event loops: loop 0 accepts connections up to the cap
// and hands each to the loop serving the fewest, reloads the policy on SIGHUP
// or when its file changes, and shuts every loop down cleanly on SIGTERM/SIGINT.
#pragma once

#include "egress_proxy/proxy_context.hpp"
#include "egress_proxy/session.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/system_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace agentctl::egress_proxy {

class Server {
public:
    // `loops` event loops (at least one). `shared.policy` and
    // `shared.resolve_map` are set before start().
    Server(ProxyShared& shared, std::size_t loops, std::string policy_file, std::string resolve_file);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Loop 0's io_context: the listening socket and the log's flush timer live there.
    [[nodiscard]] boost::asio::io_context& main_io() { return m_loops.front()->io; }

    // Starts accepting on `acceptor` (listening, on main_io()) and watching
    // the policy file and the signals, and gives up the pages start-up ran
    // (release_unwritten_file_pages); returns at once.
    void start(tcp::acceptor acceptor);
    // Runs loop 0 on this thread and every other loop on a thread of its own,
    // until shutdown; returns once all of them have stopped.
    void run();
    // Whether every connection had ended when the loops stopped (else one
    // still waits on a resolver's thread).
    [[nodiscard]] bool drained() const;

private:
    struct Loop {
        Loop(ProxyShared& shared, std::size_t index, std::size_t spare_pipes);
        // Declared before `io`, so it outlives every handler the io_context destroys.
        ProxyContext context;
        boost::asio::io_context io;
        boost::asio::steady_timer exit_timer;
        // Keeps run() going while the loop has no connection yet.
        boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work;
    };

    // Accepts connections until shutdown; `wait_first`: waits for the
    // listener before the first accept(2).
    boost::asio::awaitable<void> accept_loop(bool wait_first);
    Loop& least_busy_loop();
    boost::asio::awaitable<void> watch_policy_file();
    void reload(const char* trigger);
    // Reloads when the next grant of `snapshot` ends (a timer on loop 0, re-armed by every load).
    void arm_grant_timer(const PolicySnapshot& snapshot);
    void shutdown(int signal_number);
    // A destination's upload budget ran out: every loop ends its open
    // connections there; the counters are saved.
    void end_budget_spent(const std::string& host, std::uint16_t port);
    static std::vector<std::unique_ptr<Loop>> make_loops(ProxyShared& shared, std::size_t count);
    static void start_session(ProxyContext& context, tcp::socket socket, const tcp::endpoint& peer);
    static void wait_for_drain(Loop& loop, int ticks_left);
    void wait_for_signal();
    // At each policy poll: gives up the pages the last connections ran once
    // the proxy has been quiet for ProxyLimits::idle_release.
    void release_when_idle();
    void wait_for_hangup();

    ProxyShared& m_shared;
    std::vector<std::unique_ptr<Loop>> m_loops;
    std::vector<std::thread> m_threads;
    std::optional<tcp::acceptor> m_acceptor;
    std::string m_policy_file;
    std::string m_resolve_file;
    FileStamp m_policy_stamp;
    boost::asio::signal_set m_stop_signals;
    boost::asio::signal_set m_hangup;
    boost::asio::steady_timer m_poll_timer;
    boost::asio::steady_timer m_backoff_timer;
    boost::asio::system_timer m_grant_timer;  // the wall-clock time the next grant ends
    // Cancelled (on loop 0) when a connection ends at the cap, to wake the accept loop.
    boost::asio::steady_timer m_slot_freed;
    struct Quiet {
        std::uint64_t accepted = 0;  // ProxyShared::next_id when last seen
        std::chrono::steady_clock::time_point since;
        std::uint64_t released = 0;  // next_id when the pages were last given up
    } m_quiet;
};

// Writes the `policy` log line for a freshly loaded snapshot (loudly when it
// is unusable: then everything is refused), and mirrors a problem on stderr.
void log_policy(AccessLog& log, const PolicySnapshot& snapshot, const char* trigger);

}  // namespace agentctl::egress_proxy
