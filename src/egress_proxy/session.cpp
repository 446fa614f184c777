#include "egress_proxy/session.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "egress_proxy/asio_address.hpp"
#include "egress_proxy/request_screen.hpp"
#include "egress_proxy/resolve_file.hpp"

namespace agentctl::egress_proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

using asio::redirect_error;
using asio::use_awaitable;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double round_ms(double ms) { return static_cast<double>(static_cast<long long>(ms * 1000.0 + 0.5)) / 1000.0; }

std::string_view buffer_view(const beast::flat_buffer& buffer) {
    auto data = buffer.data();
    return {static_cast<const char*>(data.data()), data.size()};
}

constexpr std::size_t k_read_chunk = 16 * 1024;

// What the client is told when the upstream connection failed with `ec`.
Refusal connect_refusal(const tcp::endpoint& endpoint, const boost::system::error_code& ec, bool timed_out,
                        std::chrono::milliseconds timeout) {
    if (timed_out) {
        return {504, ProxyReason::ConnectTimeout,
                endpoint_text(endpoint) + " did not accept the connection within " + std::to_string(timeout.count()) +
                    " ms"};
    }
    if (ec == asio::error::connection_refused) {
        return {502, ProxyReason::ConnectionRefused, endpoint_text(endpoint) + " refused the connection"};
    }
    return {502, ProxyReason::ConnectFailed, endpoint_text(endpoint) + ": " + ec.message()};
}

}  // namespace

void set_nodelay(tcp::socket& socket) {
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
}

Session::Session(ProxyContext& context, tcp::socket client, const tcp::endpoint& peer)
    : m_context(context),
      m_client(std::move(client)),
      m_upstream(context.io),
      m_timer(context.io),
      m_buffer(context.limits.max_header_bytes + 1024) {
    m_id = m_context.shared.next_id.fetch_add(1, std::memory_order_relaxed);
    m_client_text = endpoint_text(peer);
    m_context.sessions.insert(this);
#if !defined(__linux__)
    set_nodelay(m_client);  // Linux: inherited from the listener (run_egress_proxy sets it there)
#endif
}

Session::~Session() {
    release_tunnel();
    m_context.sessions.erase(this);
    m_context.connections.fetch_sub(1, std::memory_order_relaxed);
    m_context.shared.connection_ended();
}

void Session::start() {
    asio::co_spawn(
        m_context.io, [self = shared_from_this()]() { return self->serve(); }, asio::detached);
}

void Session::close() {
    boost::system::error_code ignored;
    m_client.close(ignored);
    m_upstream.close(ignored);
    m_timer.cancel();
}

policy::Decision Session::verdict(const PolicySnapshot& snapshot, const std::string& host, std::uint16_t port,
                                  const policy::IpAddress& address) const {
    if (!snapshot.usable) return policy::Decision{false, policy::Reason::PolicyUnavailable, snapshot.problem, {}, {}};
    auto decision = policy::pre_decide(snapshot.policy, host, port, snapshot.host_addresses);
    if (!decision) {
        const std::array<policy::IpAddress, 1> dialled{address};
        decision = policy::decide(snapshot.policy, host, port, dialled, snapshot.host_addresses);
    }
    if (decision->allowed && decision->address != address) decision->allowed = false;
    return *decision;
}

bool Session::revalidate(const PolicySnapshot& snapshot) {
    if (!m_up_endpoint || !m_upstream.is_open() || !m_client.is_open()) return false;
    auto decision = verdict(snapshot, m_up_host, m_up_port, from_asio(m_up_endpoint->address()));
    if (decision.allowed) return false;
    m_revoked = policy::to_string(decision.reason);
    m_ending = record::Ending::Revoked;
    close();
    return true;
}

// ------------------------------------------------------------------ deadlines

void Session::set_deadline(Clock::duration from_now) {
    m_deadline = Clock::now() + from_now;
    if (m_timer_expiry <= m_deadline) return;  // the running timer fires earlier and re-arms
    m_timer_expiry = m_deadline;
    m_timer.expires_at(m_deadline);
    m_timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec == asio::error::operation_aborted) return;
        self->m_timer_expiry = Clock::time_point::max();
        self->on_timer();
    });
}

void Session::on_timer() {
    auto now = Clock::now();
    if (m_deadline == Clock::time_point::max() || !m_client.is_open()) return;
    if (now < m_deadline) {
        set_deadline(m_deadline - now);
        return;
    }
    m_timed_out = true;
    boost::system::error_code ignored;
    if (m_phase == Phase::Connecting) {
        m_upstream.close(ignored);  // the connect fails; the client gets a 504
    } else {
        m_client.close(ignored);
        m_upstream.close(ignored);
    }
}

// ------------------------------------------------------------------ socket I/O

// recv(2) and send(2) of its own before Asio: Asio's async_read_some and
// async_write hand even a result that was there at once back through the
// event loop, a round with an epoll_wait(2) of its own. A request head usually
// waits in the socket when its session starts, and a status line or refusal
// fits a fresh socket's send buffer, so each costs one system call. Only what
// cannot be done at once waits for the socket. (Accepted and upstream sockets
// are O_NONBLOCK from the start: the relay's splice(2) depends on it.)

namespace {

#if defined(MSG_NOSIGNAL)
constexpr int k_send_flags = MSG_DONTWAIT | MSG_NOSIGNAL;
#else
constexpr int k_send_flags = MSG_DONTWAIT;  // SIGPIPE is ignored (run_egress_proxy)
#endif

bool would_block(int error) { return error == EAGAIN || error == EWOULDBLOCK; }

}  // namespace

asio::awaitable<std::size_t> Session::read_some(tcp::socket& socket, asio::mutable_buffer into,
                                                boost::system::error_code& ec) {
    auto self = shared_from_this();
    for (;;) {
        const ssize_t n = ::recv(socket.native_handle(), into.data(), into.size(), MSG_DONTWAIT);
        if (n > 0) co_return static_cast<std::size_t>(n);
        if (n == 0) {
            ec = asio::error::eof;
            co_return 0;
        }
        if (errno == EINTR) continue;
        if (!would_block(errno)) {
            ec.assign(errno, asio::error::get_system_category());
            co_return 0;
        }
        co_await socket.async_wait(tcp::socket::wait_read, redirect_error(use_awaitable, ec));
        if (ec) co_return 0;  // closed (a deadline, the shutdown)
    }
}

asio::awaitable<std::size_t> Session::write_all(tcp::socket& socket, asio::const_buffer bytes,
                                                boost::system::error_code& ec) {
    auto self = shared_from_this();
    std::size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = ::send(socket.native_handle(), static_cast<const char*>(bytes.data()) + sent,
                                 bytes.size() - sent, k_send_flags);
        if (n > 0) {
            sent += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && !would_block(errno)) {
            ec.assign(errno, asio::error::get_system_category());
            co_return sent;
        }
        sent += co_await asio::async_write(socket, asio::buffer(bytes + sent), redirect_error(use_awaitable, ec));
        break;
    }
    co_return sent;
}

// ------------------------------------------------------------------ requests

asio::awaitable<void> Session::serve() {
    auto self = shared_from_this();
    const std::size_t max_head = m_context.limits.max_header_bytes;
    for (;;) {
        m_phase = Phase::Header;
        m_timed_out = false;
        set_deadline(m_context.limits.header_timeout);
        // Read until screen_request (the same function the fuzz target drives)
        // has a verdict. It re-parses from the start, so it runs when the head
        // looks complete (a blank line) and otherwise only each time the
        // buffer has doubled: linear work however the head is split.
        std::shared_ptr<const PolicySnapshot> snapshot;  // the policy in force when the head was complete
        ScreenResult screen;
        std::size_t scanned = 0;
        std::size_t screened_at = 0;
        boost::system::error_code ec;
        for (;;) {
            auto bytes = buffer_view(m_buffer);
            auto blank = bytes.find("\r\n\r\n", scanned);
            scanned = bytes.size() >= 3 ? bytes.size() - 3 : 0;
            if (!bytes.empty() &&
                (blank != std::string_view::npos || bytes.size() >= 2 * screened_at || bytes.size() > max_head)) {
                screened_at = bytes.size();
                snapshot = m_context.shared.policy.get();  // this request's decision stays with this snapshot
                screen = screen_request(bytes, snapshot->policy, snapshot->host_addresses, max_head);
                if (screen.stage != ScreenResult::Stage::NeedMore) break;
            }
            std::size_t room = std::min<std::size_t>(k_read_chunk, max_head + 1 - std::min(max_head, bytes.size()));
            auto n = co_await read_some(m_client, m_buffer.prepare(std::max<std::size_t>(room, 1)), ec);
            if (ec) break;
            m_buffer.commit(n);
        }
        if (ec) {
            if (m_timed_out && m_buffer.size() > 0)
                log_rejected_request("", {408, ProxyReason::HeaderTimeout, "the request head did not arrive in time"},
                                     "", 0);
            break;
        }
        clear_deadline();
        if (screen.stage == ScreenResult::Stage::Rejected) {
            log_rejected_request(screen.method, *screen.refusal, "", 0);
            co_await send_refusal(*screen.refusal, "", 0);
            break;
        }
        const RequestTarget& target = *screen.target;
        if (target.kind == RequestKind::Connect) {
            // A tunnel needs nothing of the head past screen_request: drop it and
            // keep what followed it (e.g. a TLS ClientHello) for the destination.
            m_buffer.consume(screen.head_bytes);
            co_await handle_connect(target, snapshot, std::move(screen.decision));
            co_return;
        }
        // The head is complete and valid: let the streaming parser take it
        // (and leave any body or pipelined bytes in the buffer).
        auto parser = std::make_unique<RequestParser>();
        configure_request_parser(*parser, max_head);
        while (!parser->is_header_done()) {
            auto n = parser->put(m_buffer.data(), ec);
            m_buffer.consume(n);
            if (ec || n == 0) break;
        }
        if (!parser->is_header_done()) break;  // cannot happen: screen_request accepted this head
        bool again = co_await handle_forward(std::move(parser), target, snapshot, std::move(screen.decision));
        if (m_upgraded) co_return;  // the tunnel's relays own the connection now
        if (!again) break;
    }
    close_upstream("client closed");
    close();
}

LogLine Session::decision_line(std::string_view method) const {
    LogLine entry("decision");
    entry.add("id", m_id).add("loop", m_context.index).add("client", m_client_text).add("method", method);
    return entry;
}

void Session::log_rejected_request(std::string_view method, const Refusal& refusal, std::string_view host,
                                   std::uint16_t port) {
    LogLine entry = decision_line(method);
    if (!host.empty()) entry.add("host", host).add("port", port);
    add_refusal(entry, refusal);
    m_context.shared.refusal_log.write(entry, to_string(refusal.reason));
}

void Session::log_allowed(const LogLine& entry) {
    if (m_context.limits.connection_records) m_context.shared.access_log.write(entry);
}

void Session::add_refusal(LogLine& entry, const Refusal& refusal) {
    entry.add("decision", refusal.status == 403 ? "deny" : "error").add("status", refusal.status);
    entry.add("reason", to_string(refusal.reason));
    if (!refusal.detail.empty()) entry.add("detail", refusal.detail);
}

asio::awaitable<void> Session::send_refusal(const Refusal& refusal, std::string_view host, std::uint16_t port) {
    auto self = shared_from_this();
    if (!m_client.is_open()) co_return;
    std::string response = refusal_response(refusal, host, port, m_context.shared.sandbox_name);
    set_deadline(std::chrono::seconds(5));
    boost::system::error_code ec;
    co_await write_all(m_client, asio::buffer(response), ec);
    m_client.shutdown(tcp::socket::shutdown_send, ec);
    clear_deadline();
}

asio::awaitable<bool> Session::refuse(LogLine& entry, const Refusal& refusal, const RequestTarget& target) {
    auto self = shared_from_this();
    add_refusal(entry, refusal);
    m_context.shared.refusal_log.write(entry, to_string(refusal.reason));
    co_await send_refusal(refusal, target.host, target.port);
    co_return false;
}

asio::awaitable<std::vector<policy::IpAddress>> Session::look_up(const RequestTarget& target, LogLine& entry) {
    auto self = shared_from_this();
    std::vector<policy::IpAddress> addresses;
    auto dns_start = Clock::now();
    if (auto mapped = m_context.shared.resolve_map.get()->lookup(target.host)) {
        addresses = std::move(*mapped);
        entry.add("resolved_by", "resolve-file");
    } else {
        tcp::resolver resolver(m_context.io);
        boost::system::error_code ec;
        set_deadline(m_context.limits.connect_timeout);
        m_phase = Phase::Connecting;
        const std::string service = std::to_string(target.port);  // no temporaries inside co_await (g++ 12)
        auto results = co_await resolver.async_resolve(target.host, service, tcp::resolver::numeric_service,
                                                       redirect_error(use_awaitable, ec));
        clear_deadline();
        if (!ec) {
            for (const auto& result : results) {
                auto address = from_asio(result.endpoint().address());
                if (std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
                    addresses.push_back(address);
                }
            }
        }
        entry.add("resolved_by", "system");
    }
    entry.add("dns_ms", round_ms(ms_since(dns_start)));
    co_return addresses;
}

#if defined(__linux__)

// A non-blocking connect(2) of its own instead of Asio's async_connect, which
// makes the socket non-blocking with ioctl(2), always waits for the reactor
// and then checks with poll(2) and getsockopt(2). To a destination on this
// machine (a sandbox bridge, a veth) the handshake is done by the time the
// first connect(2) returns EINPROGRESS, and a second call says so (0); only
// a destination further away is waited for, and then asked again (EALREADY:
// not yet, EISCONN or 0: connected, anything else: the connection's error).
asio::awaitable<boost::system::error_code> Session::open_and_connect(const tcp::endpoint& endpoint) {
    auto self = shared_from_this();
    boost::system::error_code ec;  // returned by name: no temporaries in co_return (g++ 12)
    const int fd = ::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0) {
        ec.assign(errno, asio::error::get_system_category());
        co_return ec;
    }
    m_upstream.assign(endpoint.protocol(), fd, ec);
    if (ec) {
        ::close(fd);
        co_return ec;
    }
    // What the proxy may queue for a destination that stops reading, and
    // take from it for a sandbox that stops reading (egress_proxy.hpp).
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &k_socket_buffer_bytes, sizeof k_socket_buffer_bytes);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &k_destination_receive_bytes, sizeof k_destination_receive_bytes);
    auto attempt = [&] {
        return ::connect(fd, endpoint.data(), static_cast<socklen_t>(endpoint.size())) == 0 ? 0 : errno;
    };
    int error = attempt();
    if (error == EINPROGRESS || error == EINTR) error = attempt();
    while (error == EALREADY) {
        co_await m_upstream.async_wait(tcp::socket::wait_write, redirect_error(use_awaitable, ec));
        if (ec) co_return ec;  // the connect timeout closed the socket
        error = attempt();
    }
    if (error != EISCONN) ec.assign(error, asio::error::get_system_category());
    co_return ec;
}

#else

asio::awaitable<boost::system::error_code> Session::open_and_connect(const tcp::endpoint& endpoint) {
    auto self = shared_from_this();
    boost::system::error_code ec;
    m_upstream.open(endpoint.protocol(), ec);
    if (!ec) m_upstream.set_option(asio::socket_base::send_buffer_size(k_socket_buffer_bytes), ec);
    if (!ec) m_upstream.set_option(asio::socket_base::receive_buffer_size(k_destination_receive_bytes), ec);
    if (!ec) co_await m_upstream.async_connect(endpoint, redirect_error(use_awaitable, ec));
    co_return ec;
}

#endif

asio::awaitable<std::optional<Refusal>> Session::connect_upstream(const tcp::endpoint& endpoint, LogLine& entry) {
    auto self = shared_from_this();
    m_phase = Phase::Connecting;
    m_timed_out = false;
    auto connect_start = Clock::now();
    set_deadline(m_context.limits.connect_timeout);
    const auto ec = co_await open_and_connect(endpoint);
    clear_deadline();
    entry.add("connect_ms", round_ms(ms_since(connect_start)));
    std::optional<Refusal> failed;
    if (ec) {
        boost::system::error_code ignored;
        m_upstream.close(ignored);
        failed = connect_refusal(endpoint, ec, m_timed_out, m_context.limits.connect_timeout);
    }
    co_return failed;  // a named value: no temporaries in co_return (g++ 12)
}

asio::awaitable<bool> Session::decide_and_connect(std::string_view method, const RequestTarget& target,
                                                  std::shared_ptr<const PolicySnapshot> snapshot,
                                                  std::optional<policy::Decision> decision) {
    auto self = shared_from_this();
    auto started = Clock::now();
    LogLine entry = decision_line(method);
    entry.add("host", target.host).add("port", target.port);
    if (!snapshot->usable) {
        entry.add("problem", snapshot->problem);
        const Refusal refusal{403, policy::Reason::PolicyUnavailable,
                              "the proxy has no usable policy, so it refuses everything"};
        co_return co_await refuse(entry, refusal, target);
    }
    // `decision`: pre_decide's verdict from screen_request, made with `snapshot`.
    if (!decision) {
        auto addresses = co_await look_up(target, entry);
        if (!m_client.is_open()) co_return false;
        if (addresses.empty()) {
            const Refusal refusal{502, ProxyReason::NameNotResolved, "`" + target.host + "` has no address"};
            co_return co_await refuse(entry, refusal, target);
        }
        decision = policy::decide_dialled(snapshot->policy, target.host, target.port, std::move(addresses),
                                          snapshot->host_addresses, *m_context.routes);
    } else if (decision->allowed && decision->address) {
        // An IP literal: pre_decide's verdict is the policy's; the kernel has the last word.
        if (auto refused = policy::vet_route(*decision->address, m_context.routes->route_to(*decision->address)))
            decision = std::move(*refused);
    }
    std::string rule = decision->rule ? decision->rule->entry() : std::string();
    if (decision->rule) entry.add(record::k_rule, rule).add(record::k_origin, decision->rule->origin);
    if (!decision->allowed || !decision->address) {
        const Refusal refusal{403, decision->reason, decision->detail};  // no temporaries inside co_await (g++ 12)
        co_return co_await refuse(entry, refusal, target);
    }
    auto endpoint = to_endpoint(*decision->address, target.port);
    entry.add("address", decision->address->to_string());
    charge_budget();  // what earlier requests on this connection sent
    auto budget = m_context.shared.budgets.find(target.host, target.port);
    if (budget && budget->spent()) {
        const auto limit = budget->limit.load(std::memory_order_relaxed);
        const Refusal refusal{429, ProxyReason::BudgetSpent,
                              fmt::format("the sandbox has sent {} bytes to {}, its upload budget of {} bytes",
                                          budget->used.load(std::memory_order_relaxed),
                                          destination_text(target.host, target.port), limit)};
        co_return co_await refuse(entry, refusal, target);
    }

    // Plain HTTP: reuse the open upstream connection when it goes to the same place.
    if (m_upstream.is_open() && m_up_endpoint == endpoint && m_up_host == target.host) {
        entry.add("reason", policy::to_string(decision->reason)).add("decision", "allow").add("reused", true);
        log_allowed(entry);
        co_return true;
    }
    close_upstream("new destination");
    if (!take_tunnel()) {
        const Refusal refusal{503, ProxyReason::TunnelLimit,
                              "the sandbox already has " + std::to_string(m_context.limits.max_tunnels) +
                                  " connections open through its proxy, its limit"};
        co_return co_await refuse(entry, refusal, target);
    }

    const auto failed = co_await connect_upstream(endpoint, entry);
    if (failed) {
        release_tunnel();
        if (!m_client.is_open()) co_return false;
        co_return co_await refuse(entry, *failed, target);
    }
    const auto current = m_context.shared.policy.get();
    if (current != snapshot) {
        // The policy was reloaded while this request was being decided: the new one has the last word.
        auto now = verdict(*current, target.host, target.port, *decision->address);
        if (!now.allowed) {
            boost::system::error_code ignored;
            m_upstream.close(ignored);
            release_tunnel();
            const Refusal refusal{403, now.reason, now.detail};
            co_return co_await refuse(entry, refusal, target);
        }
    }
    // A tunnel's leg gets it once the client has its 200 (handle_connect):
    // one system call fewer before the answer.
    if (target.kind != RequestKind::Connect) set_nodelay(m_upstream);
    entry.add("reason", policy::to_string(decision->reason)).add("decision", "allow").add("status", 200);
    entry.add("total_ms", round_ms(ms_since(started)));
    log_allowed(entry);
    m_up_host = target.host;
    m_up_port = target.port;
    m_up_endpoint = endpoint;
    m_up_since = Clock::now();
    m_up_started = std::chrono::system_clock::now();
    m_up_rule = std::move(rule);
    m_budget = std::move(budget);
    m_charged = 0;
    m_up_origin = decision->rule ? decision->rule->origin : std::string();
    m_ending.reset();
    m_bytes_up = 0;
    m_bytes_down = 0;
    co_return true;
}

bool Session::take_tunnel() {
    if (m_holds_tunnel) return true;
    auto& open = m_context.shared.open_tunnels;
    std::size_t held = open.load(std::memory_order_relaxed);
    do {
        if (held >= m_context.limits.max_tunnels) return false;
    } while (!open.compare_exchange_weak(held, held + 1));
    m_holds_tunnel = true;
    return true;
}

void Session::release_tunnel() {
    if (!m_holds_tunnel) return;
    m_holds_tunnel = false;
    m_context.shared.open_tunnels.fetch_sub(1);
}

void Session::close_upstream(const char* why) {
    release_tunnel();
    if (!m_up_endpoint) return;
    charge_budget();
    log_upstream_closed();
    (void)why;
    boost::system::error_code ignored;
    m_upstream.close(ignored);
    m_up_endpoint.reset();
    m_up_buffer.clear();
}

void Session::log_upstream_closed() {
    using record::Ending;
    if (!m_context.limits.connection_records) return;
    const Ending ending = m_ending                    ? *m_ending
                          : m_timed_out               ? Ending::IdleTimeout
                          : m_context.shared.stopping ? Ending::ProxyStop
                                                      : Ending::Closed;
    LogLine entry(record::k_event);
    entry.add("id", m_id).add("client", m_client_text).add(record::k_sandbox, m_context.shared.sandbox_name);
    entry.add(record::k_start, utc_timestamp(m_up_started));
    entry.add(record::k_host, m_up_host).add(record::k_port, m_up_port);
    entry.add(record::k_address, m_up_endpoint ? m_up_endpoint->address().to_string() : std::string());
    if (!m_up_rule.empty()) entry.add(record::k_rule, m_up_rule).add(record::k_origin, m_up_origin);
    entry.add(record::k_bytes_up, m_bytes_up).add(record::k_bytes_down, m_bytes_down);
    entry.add(record::k_duration_ms, round_ms(ms_since(m_up_since)));
    entry.add(record::k_ended, record::to_string(ending));
    if (ending == Ending::Revoked) entry.add(record::k_reason, m_revoked);
    m_context.shared.access_log.write(entry);
}

}  // namespace agentctl::egress_proxy
