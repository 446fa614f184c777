// State of the proxy's event loops: what every loop shares (ProxyShared) and
// what one loop's thread alone touches (ProxyContext). Included only by the
// proxy's Asio translation units.
#pragma once

#include <utility>  // before Asio: awaitable.hpp needs std::exchange on g++ 12

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "agentctl/host_network.hpp"
#include "egress_proxy/access_log.hpp"
#include "egress_proxy/refusal_log.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "egress_proxy/policy_state.hpp"
#include "egress_proxy/resolve_file.hpp"
#include "egress_proxy/shared_snapshot.hpp"
#include "egress_proxy/upload_budget.hpp"

namespace agentctl::egress_proxy {

class Session;
class TlsIntercept;

// Empty default-size pipes one proxy keeps for the next tunnels (two per
// tunnel), shared out among its event loops: saves pipe2 and two closes per
// direction on short connections (Linux splice relay).
inline constexpr std::size_t k_spare_pipes = 16;

// What the proxy's event loops share. Loop 0 runs the listener, the signals
// and the reloads; the fields other loops write are atomic.
struct ProxyShared {
    ProxyShared(ProxyLimits proxy_limits, std::string sandbox, AccessLog& log, RefusalLog& refusals,
                BudgetBook& upload_budgets, std::string server_fib_trie = {})
        : limits(proxy_limits),
          sandbox_name(std::move(sandbox)),
          server_routes(std::move(server_fib_trie)),
          access_log(log),
          refusal_log(refusals),
          budgets(upload_budgets) {}

    const ProxyLimits limits;
    const std::string sandbox_name;
    // ProxyOptions::server_routes (empty: this machine's kernel alone decides).
    const std::string server_routes;
    AccessLog& access_log;    // thread-safe
    RefusalLog& refusal_log;  // thread-safe: every refused request goes here
    BudgetBook& budgets;      // thread-safe
    SharedSnapshot<PolicySnapshot> policy;
    SharedSnapshot<ResolveMap> resolve_map;  // never null once running
    std::atomic<std::uint64_t> next_id{1};
    std::atomic<bool> stopping{false};
    // Connections accepted and not yet ended, across loops: counted up by the
    // accept loop when it accepts one, down by ~Session. The connection cap.
    std::atomic<std::size_t> open_connections{0};
    // Connections open to destinations across loops (limits.max_tunnels):
    // counted up before a dial, down when that connection closes.
    std::atomic<std::size_t> open_tunnels{0};
    // Grown (bulk) pipes open across loops (Linux splice relay).
    std::atomic<std::size_t> bulk_pipes{0};
    // Set before the loops start when the sandbox has secrets: CONNECTs to the
    // hosts they are bound to are terminated; null: every CONNECT is a tunnel.
    std::shared_ptr<TlsIntercept> intercept;
    // Set before the loops start; called from any loop when a connection ends
    // with the proxy at its cap, to wake the accept loop.
    std::function<void()> slot_freed;
    // Set before the loops start; called from any loop when a destination's
    // upload budget runs out, to end every open connection there.
    std::function<void(const std::string& host, std::uint16_t port)> budget_spent;

    // Ends one connection's share of the cap (~Session).
    void connection_ended() {
        if (open_connections.fetch_sub(1) == limits.max_connections && !stopping) slot_freed();
    }
};

// One event loop: its io_context, and the connections it serves. Only the
// loop's own thread touches these, but for the atomic count.
struct ProxyContext {
    ProxyContext(boost::asio::io_context& io_context, ProxyShared& proxy, std::size_t loop_index, std::size_t spares)
        : io(io_context),
          shared(proxy),
          limits(proxy.limits),
          index(loop_index),
          spare_pipe_limit(spares),
          routes(proxy.server_routes.empty()
                     ? policy::make_kernel_route_table()
                     : policy::make_server_route_table(proxy.server_routes, policy::make_kernel_route_table())) {}

    boost::asio::io_context& io;
    ProxyShared& shared;
    const ProxyLimits& limits;  // shared.limits
    const std::size_t index;    // 0: the loop that accepts; decision lines carry it as `loop`
    // This loop's live connections, for reloads and shutdown.
    std::unordered_set<Session*> sessions;
    // The same count, for the accept loop on loop 0 to pick the least busy
    // loop: counted up when it hands a connection here, down by ~Session.
    std::atomic<std::size_t> connections{0};
    // Empty kernel pipes of the default size (read end, write end) kept for
    // the next tunnel, at most spare_pipe_limit (this loop's share of k_spare_pipes).
    std::vector<std::pair<int, int>> spare_pipes;
    const std::size_t spare_pipe_limit;
    // Asked, just before each dial, where the kernel sends the chosen address
    // (policy::vet_route): this loop's own, as it is not shared between threads.
    const std::unique_ptr<policy::RouteTable> routes;
};

}  // namespace agentctl::egress_proxy
