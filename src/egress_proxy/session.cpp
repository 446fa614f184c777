#include "egress_proxy/session.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>

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
#include <limits>
#include <cstring>

#include <nlohmann/json.hpp>

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

std::string endpoint_text(const tcp::endpoint& endpoint) {
    auto address = endpoint.address();
    if (address.is_v6()) return "[" + address.to_string() + "]:" + std::to_string(endpoint.port());
    return address.to_string() + ":" + std::to_string(endpoint.port());
}

std::string_view buffer_view(const beast::flat_buffer& buffer) {
    auto data = buffer.data();
    return {static_cast<const char*>(data.data()), data.size()};
}

constexpr std::size_t k_read_chunk = 16 * 1024;

void set_nodelay(tcp::socket& socket) {
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
}

}  // namespace

Session::Session(ProxyContext& context, tcp::socket client, const tcp::endpoint& peer)
    : m_context(context),
      m_client(std::move(client)),
      m_upstream(context.io),
      m_timer(context.io),
      m_buffer(context.limits.max_header_bytes + 1024) {
    m_id = m_context.next_id++;
    m_client_text = endpoint_text(peer);
    m_context.sessions.insert(this);
}

Session::~Session() {
    m_context.sessions.erase(this);
    m_context.slot_freed.cancel();
}

void Session::start() {
    set_nodelay(m_client);
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
                snapshot = m_context.policy;  // this request's decision stays with this snapshot
                screen = screen_request(bytes, snapshot->policy, snapshot->host_addresses, max_head);
                if (screen.stage != ScreenResult::Stage::NeedMore) break;
            }
            std::size_t room = std::min<std::size_t>(k_read_chunk, max_head + 1 - std::min(max_head, bytes.size()));
            auto n = co_await m_client.async_read_some(m_buffer.prepare(std::max<std::size_t>(room, 1)),
                                                       redirect_error(use_awaitable, ec));
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
        const RequestTarget& target = *screen.target;
        if (target.kind == RequestKind::Connect) {
            parser.reset();  // nothing of the request head stays allocated for the tunnel's lifetime
            co_await handle_connect(target, snapshot, std::move(screen.decision));
            co_return;
        }
        bool again = co_await handle_forward(std::move(parser), target, snapshot, std::move(screen.decision));
        if (m_upgraded) co_return;  // the tunnel's relays own the connection now
        if (!again) break;
    }
    close_upstream("client closed");
    close();
}

void Session::log_rejected_request(std::string_view method, const Refusal& refusal, std::string_view host,
                                   std::uint16_t port) {
    nlohmann::json entry{
        {"time", utc_timestamp()}, {"event", "decision"}, {"id", m_id}, {"client", m_client_text}, {"method", method}};
    if (!host.empty()) {
        entry["host"] = host;
        entry["port"] = port;
    }
    entry["decision"] = refusal.status == 403 ? "deny" : "error";
    entry["status"] = refusal.status;
    entry["reason"] = to_string(refusal.reason);
    if (!refusal.detail.empty()) entry["detail"] = refusal.detail;
    m_context.access_log.write(entry);
}

asio::awaitable<void> Session::send_refusal(const Refusal& refusal, std::string_view host, std::uint16_t port) {
    auto self = shared_from_this();
    if (!m_client.is_open()) co_return;
    std::string response = refusal_response(refusal, host, port, m_context.sandbox_name);
    set_deadline(std::chrono::seconds(5));
    boost::system::error_code ec;
    co_await asio::async_write(m_client, asio::buffer(response), redirect_error(use_awaitable, ec));
    m_client.shutdown(tcp::socket::shutdown_send, ec);
    clear_deadline();
}

asio::awaitable<bool> Session::refuse(nlohmann::json& entry, const Refusal& refusal, const RequestTarget& target) {
    auto self = shared_from_this();
    entry["decision"] = refusal.status == 403 ? "deny" : "error";
    entry["status"] = refusal.status;
    entry["reason"] = to_string(refusal.reason);
    if (!refusal.detail.empty()) entry["detail"] = refusal.detail;
    m_context.access_log.write(entry);
    co_await send_refusal(refusal, target.host, target.port);
    co_return false;
}

asio::awaitable<bool> Session::decide_and_connect(std::string_view method, const RequestTarget& target,
                                                  std::shared_ptr<const PolicySnapshot> snapshot,
                                                  std::optional<policy::Decision> decision) {
    auto self = shared_from_this();
    auto started = Clock::now();
    nlohmann::json entry{{"time", utc_timestamp()}, {"event", "decision"}, {"id", m_id},
                         {"client", m_client_text}, {"method", method},    {"host", target.host},
                         {"port", target.port}};
    if (!snapshot->usable) {
        entry["problem"] = snapshot->problem;
        {
            const Refusal refusal{403, policy::Reason::PolicyUnavailable,
                                  "the proxy has no usable policy, so it refuses everything"};
            co_return co_await refuse(entry, refusal, target);
        }
    }
    const auto& own = snapshot->host_addresses;
    // `decision`: pre_decide's verdict from screen_request, made with `snapshot`.
    if (!decision) {
        std::vector<policy::IpAddress> addresses;
        auto dns_start = Clock::now();
        if (auto mapped = m_context.resolve_map->lookup(target.host)) {
            addresses = std::move(*mapped);
            entry["resolved_by"] = "resolve-file";
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
            entry["resolved_by"] = "system";
        }
        entry["dns_ms"] = round_ms(ms_since(dns_start));
        if (!m_client.is_open()) co_return false;
        if (addresses.empty()) {
            {
                const Refusal refusal{502, ProxyReason::NameNotResolved, "`" + target.host + "` has no address"};
                co_return co_await refuse(entry, refusal, target);
            }
        }
        decision = policy::decide(snapshot->policy, target.host, target.port, addresses, own);
    }
    if (decision->rule) {
        entry["rule"] = decision->rule->entry();
        entry["origin"] = decision->rule->origin;
    }
    if (!decision->allowed || !decision->address) {
        {
            const Refusal refusal{403, decision->reason, decision->detail};
            co_return co_await refuse(entry, refusal, target);
        }
    }
    auto endpoint = to_endpoint(*decision->address, target.port);
    entry["address"] = decision->address->to_string();
    entry["reason"] = policy::to_string(decision->reason);

    // Plain HTTP: reuse the open upstream connection when it goes to the same place.
    if (m_upstream.is_open() && m_up_endpoint == endpoint && m_up_host == target.host) {
        entry["decision"] = "allow";
        entry["reused"] = true;
        m_context.access_log.write(entry);
        co_return true;
    }
    close_upstream("new destination");

    m_phase = Phase::Connecting;
    m_timed_out = false;
    auto connect_start = Clock::now();
    set_deadline(m_context.limits.connect_timeout);
    boost::system::error_code ec;
    m_upstream.open(endpoint.protocol(), ec);
    if (!ec) co_await m_upstream.async_connect(endpoint, redirect_error(use_awaitable, ec));
    clear_deadline();
    entry["connect_ms"] = round_ms(ms_since(connect_start));
    if (ec) {
        boost::system::error_code ignored;
        m_upstream.close(ignored);
        if (!m_client.is_open()) co_return false;
        if (m_timed_out) {
            {
                const Refusal refusal{504, ProxyReason::ConnectTimeout,
                                      endpoint_text(endpoint) + " did not accept the connection within " +
                                          std::to_string(m_context.limits.connect_timeout.count()) + " ms"};
                co_return co_await refuse(entry, refusal, target);
            }
        }
        if (ec == asio::error::connection_refused) {
            {
                const Refusal refusal{502, ProxyReason::ConnectionRefused,
                                      endpoint_text(endpoint) + " refused the connection"};
                co_return co_await refuse(entry, refusal, target);
            }
        }
        {
            const Refusal refusal{502, ProxyReason::ConnectFailed, endpoint_text(endpoint) + ": " + ec.message()};
            co_return co_await refuse(entry, refusal, target);
        }
    }
    if (m_context.policy != snapshot) {
        // The policy was reloaded while this request was being decided: the new one has the last word.
        auto now = verdict(*m_context.policy, target.host, target.port, *decision->address);
        if (!now.allowed) {
            boost::system::error_code ignored;
            m_upstream.close(ignored);
            const Refusal refusal{403, now.reason, now.detail};
            co_return co_await refuse(entry, refusal, target);
        }
    }
    set_nodelay(m_upstream);
    entry["decision"] = "allow";
    entry["status"] = 200;
    entry["total_ms"] = round_ms(ms_since(started));
    m_context.access_log.write(entry);
    m_up_host = target.host;
    m_up_port = target.port;
    m_up_endpoint = endpoint;
    m_up_since = Clock::now();
    m_bytes_up = 0;
    m_bytes_down = 0;
    co_return true;
}

void Session::close_upstream(const char* why) {
    if (!m_up_endpoint) return;
    log_upstream_closed();
    (void)why;
    boost::system::error_code ignored;
    m_upstream.close(ignored);
    m_up_endpoint.reset();
    m_up_buffer.clear();
}

void Session::log_upstream_closed() {
    nlohmann::json entry{{"time", utc_timestamp()},
                         {"event", "close"},
                         {"id", m_id},
                         {"client", m_client_text},
                         {"host", m_up_host},
                         {"port", m_up_port},
                         {"address", m_up_endpoint ? m_up_endpoint->address().to_string() : std::string()},
                         {"bytes_up", m_bytes_up},
                         {"bytes_down", m_bytes_down},
                         {"duration_ms", round_ms(ms_since(m_up_since))}};
    if (m_timed_out) entry["timed_out"] = true;
    if (!m_revoked.empty()) {
        entry["closed_by"] = "policy-reload";
        entry["reason"] = m_revoked;
    }
    m_context.access_log.write(entry);
}

}  // namespace agentctl::egress_proxy
