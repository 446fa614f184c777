// One client connection: reads request heads, decides, and either tunnels
// (CONNECT) or forwards plain HTTP requests. Private to the proxy.
#pragma once

#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "egress_proxy/connection_record.hpp"
#include "egress_proxy/proxy_context.hpp"
#include "egress_proxy/request_target.hpp"
#include "egress_proxy/responses.hpp"
#include "egress_proxy/tls_intercept.hpp"

namespace agentctl::egress_proxy {

using tcp = boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using RequestParser = boost::beast::http::request_parser<boost::beast::http::buffer_body>;

// TCP_NODELAY on `socket`. A failure is ignored: the connection works, only slower.
void set_nodelay(tcp::socket& socket);

class Session : public std::enable_shared_from_this<Session> {
public:
    Session(ProxyContext& context, tcp::socket client, const tcp::endpoint& peer);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Starts serving the connection on a coroutine of its own; the session
    // keeps itself alive until done.
    void start();
    // Serves the connection on the awaiting coroutine, until it is done (a
    // tunnel's relays then run on their own). start() spawns this.
    boost::asio::awaitable<void> serve();
    // Closes both sockets; pending operations finish with an error (shutdown).
    void close();
    // After a policy reload: closes the connection when the destination its
    // open upstream connection goes to (tunnel or keep-alive) is no longer
    // allowed by `snapshot`. Returns true when it closed it.
    bool revalidate(const PolicySnapshot& snapshot);
    // A destination's upload budget ran out: closes the connection when its
    // open upstream connection goes to host:port.
    void end_for_budget(const std::string& host, std::uint16_t port);

private:
    enum class Phase { Header, Connecting, Forwarding, Tunnel };

    // `snapshot` is the policy the request was screened with; `decision` is
    // screen_request's pre_decide verdict (nullopt: a name to resolve).
    boost::asio::awaitable<void> handle_connect(const RequestTarget& target,
                                                std::shared_ptr<const PolicySnapshot> snapshot,
                                                std::optional<policy::Decision> decision);
    // Returns true when the client connection may carry another request.
    boost::asio::awaitable<bool> handle_forward(std::unique_ptr<RequestParser> parser, const RequestTarget& target,
                                                std::shared_ptr<const PolicySnapshot> snapshot,
                                                std::optional<policy::Decision> decision);

    // Decides host:port against `snapshot`, resolving if needed, and
    // connects m_upstream to the one allowed address. Writes the decision log line.
    // On refusal or failure returns false after answering the client.
    boost::asio::awaitable<bool> decide_and_connect(std::string_view method, const RequestTarget& target,
                                                    std::shared_ptr<const PolicySnapshot> snapshot,
                                                    std::optional<policy::Decision> decision);
    // Resolves target.host (the resolve file first, then the system resolver);
    // records how on `entry`. Empty: the name has no address.
    boost::asio::awaitable<std::vector<policy::IpAddress>> look_up(const RequestTarget& target, LogLine& entry);
    // Opens m_upstream and connects it to `endpoint`; the connection's error.
    boost::asio::awaitable<boost::system::error_code> open_and_connect(const tcp::endpoint& endpoint);
    // Opens and connects m_upstream within the connect timeout; the refusal to
    // answer when it fails.
    boost::asio::awaitable<std::optional<Refusal>> connect_upstream(const tcp::endpoint& endpoint, LogLine& entry);
    // Logs the refusal on `entry` and answers the client; always yields false.
    boost::asio::awaitable<bool> refuse(LogLine& entry, const Refusal& refusal, const RequestTarget& target);
    static void add_refusal(LogLine& entry, const Refusal& refusal);
    boost::asio::awaitable<void> send_refusal(const Refusal& refusal, std::string_view host, std::uint16_t port);
    // A `decision` line begun with this connection's id, loop, client and the method.
    [[nodiscard]] LogLine decision_line(std::string_view method) const;
    void log_rejected_request(std::string_view method, const Refusal& refusal, std::string_view host,
                              std::uint16_t port);
    // Writes `entry`, an allowed request's decision line, unless limits.connection_records is off.
    void log_allowed(const LogLine& entry);

    // Reads what `socket` has, up to `into`'s size (0 and `ec` set at EOF or on
    // an error): at once when bytes are waiting, else once they arrive.
    boost::asio::awaitable<std::size_t> read_some(tcp::socket& socket, boost::asio::mutable_buffer into,
                                                  boost::system::error_code& ec);
    // Writes all of `bytes` to `socket`; the count written (short, with `ec`, on an error).
    boost::asio::awaitable<std::size_t> write_all(tcp::socket& socket, boost::asio::const_buffer bytes,
                                                  boost::system::error_code& ec);

    // CONNECT to a host a secret is bound to (decide_and_connect has connected
    // m_upstream): TLS with the sandbox under a certificate of the sandbox CA,
    // TLS to the host checked against the trust store, then request by request
    // with the placeholders replaced (session_intercept.cpp).
    boost::asio::awaitable<void> intercept_tls(std::shared_ptr<TlsIntercept> intercept, std::string host);

    // Tunnel: both directions spliced concurrently; the session ends when both end.
    void start_tunnel();
    // `budget`: the upload budget the bytes count against (the sandbox's
    // direction to a destination that has one), or null.
    boost::asio::awaitable<void> relay(tcp::socket& from, tcp::socket& to, std::uint64_t& counter,
                                       BudgetCounter* budget);
    // Charges the bytes sent up since the last charge to m_budget; when that
    // spends it, ends every connection to the destination (this one too).
    void charge_budget();
    void budget_spent();
    // The source's FIN: pass it on to `to` (the relay then ends).
    void pass_fin(tcp::socket& to);
    void relay_finished();

    // Deadline handling: one timer per connection, re-armed lazily.
    void set_deadline(Clock::duration from_now);
    void clear_deadline() { m_deadline = Clock::time_point::max(); }
    void on_timer();
    // The verdict of `snapshot` on host:port dialled at `address` (the dialled
    // address must still be the one the policy would pick among itself).
    [[nodiscard]] policy::Decision verdict(const PolicySnapshot& snapshot, const std::string& host, std::uint16_t port,
                                           const policy::IpAddress& address) const;
    void close_upstream(const char* why);
    // One of the sandbox's limits.max_tunnels connections to destinations,
    // held from before the dial until that connection closes; false at the cap.
    bool take_tunnel();
    void release_tunnel();
    void log_upstream_closed();

    // Bytes of a plain-HTTP body moved per read (m_body_chunk).
    static constexpr std::size_t k_body_chunk = 16 * 1024;
    static_assert(k_body_chunk >= k_screened_body_bytes, "the start of a body is screened in one chunk");

    ProxyContext& m_context;
    tcp::socket m_client;
    tcp::socket m_upstream;
    boost::asio::steady_timer m_timer;
    Clock::time_point m_deadline = Clock::time_point::max();
    Clock::time_point m_timer_expiry = Clock::time_point::max();
    boost::beast::flat_buffer m_buffer;     // client bytes read ahead
    boost::beast::flat_buffer m_up_buffer;  // upstream bytes read ahead (plain HTTP)
    std::unique_ptr<char[]> m_body_chunk;   // plain-HTTP bodies pass through here, one direction at a time
    Phase m_phase = Phase::Header;
    bool m_timed_out = false;
    bool m_upgraded = false;                 // a plain-HTTP request was upgraded (101): the connection is now a tunnel
    std::string m_revoked;                   // why a reload closed this connection (the new policy's reason)
    std::optional<record::Ending> m_ending;  // set by what closes the connection, when not the peers
    int m_relays_running = 0;
    bool m_holds_tunnel = false;  // counted in shared.open_tunnels

    std::uint64_t m_id = 0;
    std::string m_client_text;
    // The current upstream connection, for reuse (plain HTTP) and the close line.
    std::string m_up_host;
    std::uint16_t m_up_port = 0;
    std::optional<tcp::endpoint> m_up_endpoint;
    Clock::time_point m_up_since{};
    std::chrono::system_clock::time_point m_up_started{};  // the close record's start
    std::string m_up_rule;  // the allow rule that let it through (`--allow` form), and its origin
    std::string m_up_origin;
    std::uint64_t m_bytes_up = 0;
    std::uint64_t m_bytes_down = 0;
    std::shared_ptr<BudgetCounter> m_budget;  // the upload budget of the upstream connection, or null
    std::uint64_t m_charged = 0;              // of m_bytes_up, what m_budget has counted
};

}  // namespace agentctl::egress_proxy
