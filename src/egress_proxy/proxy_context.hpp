// State shared by the proxy's listener and its connections (one io_context,
// one thread). Included only by the proxy's Asio translation units.
#pragma once

#include <utility>  // before Asio: awaitable.hpp needs std::exchange on g++ 12

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "egress_proxy/access_log.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "egress_proxy/policy_state.hpp"
#include "egress_proxy/resolve_file.hpp"

namespace agentctl::egress_proxy {

class Session;

struct ProxyContext {
    ProxyContext(boost::asio::io_context& io_context, ProxyLimits proxy_limits, std::string sandbox, AccessLog& log)
        : io(io_context),
          limits(proxy_limits),
          sandbox_name(std::move(sandbox)),
          access_log(log),
          slot_freed(io_context) {}

    boost::asio::io_context& io;
    const ProxyLimits limits;
    const std::string sandbox_name;
    AccessLog& access_log;
    std::shared_ptr<const PolicySnapshot> policy;   // swapped on reload
    std::shared_ptr<const ResolveMap> resolve_map;  // never null once running
    std::uint64_t next_id = 1;
    bool stopping = false;
    // Live connections, for shutdown and the connection cap.
    std::unordered_set<Session*> sessions;
    // Cancelled whenever a connection ends, to wake an accept loop at the cap.
    boost::asio::steady_timer slot_freed;
    // Empty kernel pipes of the default size (read end, write end) kept for
    // the next tunnel, and how many grown (bulk) pipes are open (Linux splice relay).
    std::vector<std::pair<int, int>> spare_pipes;
    std::size_t bulk_pipes = 0;
};

}  // namespace agentctl::egress_proxy
