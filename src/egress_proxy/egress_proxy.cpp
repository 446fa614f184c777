// run_egress_proxy: option checks, the listening socket, the pid file, and the
// event loops that serve the connections (one per CPU, Server).
#include "egress_proxy/egress_proxy.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "agentctl/host_network.hpp"
#include "core/files.hpp"
#include "egress_proxy/asio_address.hpp"
#include "egress_proxy/resident_memory.hpp"
#include "egress_proxy/server.hpp"
#include "egress_proxy/secret_listener.hpp"
#include "egress_proxy/tls_intercept.hpp"

namespace agentctl::egress_proxy {

namespace asio = boost::asio;

namespace {

constexpr std::chrono::milliseconds k_log_flush{20};

tcp::endpoint parse_listen(const std::string& listen) {
    auto fail = [&](const std::string& why) -> Error {
        return Error("--listen " + listen + ": " + why, "use ADDRESS:PORT, e.g. 127.0.0.1:50123 or [::1]:50123");
    };
    std::string host;
    std::string port_text;
    if (!listen.empty() && listen.front() == '[') {
        auto close = listen.find("]:");
        if (close == std::string::npos) throw fail("an IPv6 address needs the form [ADDRESS]:PORT");
        host = listen.substr(1, close - 1);
        port_text = listen.substr(close + 2);
    } else {
        auto colon = listen.rfind(':');
        if (colon == std::string::npos) throw fail("the port is missing");
        host = listen.substr(0, colon);
        port_text = listen.substr(colon + 1);
    }
    boost::system::error_code ec;
    auto address = asio::ip::make_address(host, ec);
    if (ec) throw fail("`" + host + "` is not an IP address");
    unsigned port = 0;
    auto [ptr, err] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || err != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) {
        throw fail("`" + port_text + "` is not a port number (0-65535)");
    }
    return {address, static_cast<std::uint16_t>(port)};
}

// The proxy serves sandboxes only: it listens on loopback (Lima forwards the
// guest's traffic there) or on an address of an agentctl sandbox bridge
// (Incus), never on an interface another network can reach.
void check_listen_address(const tcp::endpoint& endpoint, const std::string& listen, bool companion) {
    const auto& address = endpoint.address();
    if (address.is_loopback()) return;
    std::string owner;
    const auto wanted = from_asio(address);
    for (const auto& entry : policy::interface_addresses()) {
        if (entry.address != wanted) continue;
        if (entry.interface.starts_with(policy::k_sandbox_bridge_prefix)) return;
        owner = entry.interface;
    }
    if (companion && !address.is_unspecified() && !owner.empty()) return;
    std::string where = address.is_unspecified() ? "every interface"
                        : owner.empty()          ? "no interface of this machine"
                                                 : "interface " + owner;
    throw Error("--listen " + listen + ": refusing to listen on " + address.to_string() + " (" + where +
                    "): the egress proxy listens only on loopback or on an agentctl sandbox bridge (" +
                    std::string(policy::k_sandbox_bridge_prefix) + "...)",
                "use 127.0.0.1:PORT, or an address of the sandbox's bridge");
}

// Lifts the soft descriptor limit to the hard one; returns the soft limit now in force.
rlim_t raise_descriptor_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &limit);
        ::getrlimit(RLIMIT_NOFILE, &limit);
    }
    return limit.rlim_cur;
}

// The leg between a sandbox and the proxy never leaves this machine (a
// sandbox bridge, or loopback where Lima forwards the guest's traffic), so
// nothing on it needs pacing. Where the host's default congestion control is
// BBR without the fq qdisc, the kernel paces every connection itself with an
// hrtimer per burst; on the download direction of that leg this was about
// 40 % of the proxy's CPU per MiB (docs/benchmarks-history.md, "Eighth pass"). Accepted
// sockets inherit the listener's choice, so the sandbox leg gets cubic with
// one setsockopt here; the leg to the destination keeps the host's default.
// Returns the algorithm the sandbox leg uses.
std::string choose_sandbox_leg_congestion(tcp::acceptor& acceptor) {
#if defined(__linux__) && defined(TCP_CONGESTION)
    constexpr std::string_view k_unpaced = "cubic";
    const int fd = acceptor.native_handle();
    ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, k_unpaced.data(), static_cast<socklen_t>(k_unpaced.size()));
    char name[32] = {};  // TCP_CA_NAME_MAX is 16
    socklen_t length = sizeof name - 1;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) == 0) return std::string(name);
#else
    (void)acceptor;
#endif
    return "system default";
}

// `wanted`, or (0) one loop per CPU this process may run on, at most k_max_event_loops.
std::size_t event_loop_count(std::size_t wanted) {
    std::size_t cpus = wanted;
    if (cpus == 0) {
        cpus = std::thread::hardware_concurrency();
#if defined(__linux__)
        cpu_set_t allowed;
        CPU_ZERO(&allowed);
        if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) cpus = static_cast<std::size_t>(CPU_COUNT(&allowed));
#endif
    }
    return std::clamp<std::size_t>(cpus, 1, k_max_event_loops);
}

std::string default_sandbox_name(const std::string& policy_file) {
    auto parent = std::filesystem::path(policy_file).parent_path().filename().string();
    return parent.empty() ? std::string("<sandbox>") : parent;
}

// Not dumpable, from its start (before any secret is read): another process
// of the same user cannot ptrace the proxy or read its
// /proc/PID/{environ,mem,cwd,fd} (they become root's), and it leaves no core
// file.
void refuse_inspection() {
#if defined(__linux__)
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#endif
}

}  // namespace

int run_egress_proxy(const ProxyOptions& options) {
    refuse_inspection();
    try {
        if (options.policy_file.empty()) throw Error("--policy is required", "pass the sandbox's policy file");
        auto endpoint = parse_listen(options.listen);
        check_listen_address(endpoint, options.listen, options.companion);
        ::signal(SIGPIPE, SIG_IGN);  // splice(2) to a closed peer must fail, not kill the proxy
        keep_freed_memory();

        ProxyLimits limits = options.limits;
        rlim_t descriptors = raise_descriptor_limit();
        std::size_t cap = descriptors > 64 ? static_cast<std::size_t>((descriptors - 32) / 2) : 16;
        limits.max_connections = std::min(limits.max_connections, cap);

        auto resolve_map = std::make_shared<const ResolveMap>(
            options.resolve_file.empty() ? ResolveMap() : ResolveMap::load(options.resolve_file));
        AccessLog log(options.log_file, limits.log_max_bytes);
        AccessLog refused(options.log_file.empty() ? std::string() : refusal_log_path(options.log_file),
                          limits.log_max_bytes);
        RefusalLog refusals(refused);

        std::string sandbox =
            options.sandbox_name.empty() ? default_sandbox_name(options.policy_file) : options.sandbox_name;
        BudgetBook budgets(budget_state_path(options.log_file));
        if (!budgets.problem().empty()) {
            log.write(
                {{"time", utc_timestamp()}, {"event", "budgets"}, {"level", "error"}, {"message", budgets.problem()}});
        }
        ProxyShared shared(limits, sandbox, log, refusals, budgets, options.server_routes);
        std::size_t secret_count = 0;
        if (options.secrets_fd >= 0) {
            // (The proxy is not dumpable from its start: refuse_inspection.)
            auto payload = read_secret_payload(options.secrets_fd);
            secret_count = payload.secrets.size();
            if (secret_count > 0)
                shared.intercept = std::make_shared<TlsIntercept>(std::move(payload), options.upstream_ca_file);
        }
        shared.resolve_map.set(resolve_map);
        const std::size_t loops = event_loop_count(limits.event_loops);
        Server server(shared, loops, options.policy_file, options.resolve_file);

        std::optional<SecretListener> rotation;
        if (shared.intercept && !options.secrets_socket.empty())
            rotation.emplace(server.main_io(), options.secrets_socket, options.secrets_peer_uid, *shared.intercept,
                             log);

        tcp::acceptor acceptor(server.main_io());
        boost::system::error_code ec;
        acceptor.open(endpoint.protocol(), ec);
        if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
        // Accepted sockets inherit TCP_NODELAY from the listener: one setsockopt
        // here instead of one per connection.
        if (!ec) acceptor.set_option(tcp::no_delay(true), ec);
        // ... and the sandbox leg's bounded buffers (k_socket_buffer_bytes): that
        // leg never leaves this machine, so a small window still fills it.
        if (!ec) acceptor.set_option(asio::socket_base::send_buffer_size(k_socket_buffer_bytes), ec);
        if (!ec) acceptor.set_option(asio::socket_base::receive_buffer_size(k_socket_buffer_bytes), ec);
        const std::string sandbox_leg_congestion = ec ? std::string() : choose_sandbox_leg_congestion(acceptor);
        if (!ec) acceptor.bind(endpoint, ec);
        if (!ec) acceptor.listen(4096, ec);
        if (!ec) acceptor.non_blocking(true, ec);  // the accept loop accepts until EAGAIN
        if (ec) {
            throw Error("cannot listen on " + endpoint_text(endpoint) + ": " + ec.message(),
                        "pick a free port, or stop whatever already listens there");
        }
        auto bound = acceptor.local_endpoint(ec);

        // Decision lines are queued and written within k_log_flush of the first
        // one (one write(2) per batch instead of one per connection); SIGTERM and
        // SIGINT flush before exit. Any loop may queue the first line: the
        // timer is armed on loop 0.
        asio::steady_timer log_timer(server.main_io());
        log.defer_writes([&server, &log_timer, &log] {
            asio::post(server.main_io(), [&log_timer, &log] {
                log_timer.expires_after(k_log_flush);
                log_timer.async_wait([&log](const boost::system::error_code& error) {
                    if (!error) log.flush();
                });
            });
        });
        // Lines are written at once again before the timer and the loops go,
        // also when leaving by an exception (a connection's last line would
        // otherwise arm a timer on a loop being destroyed).
        struct WriteAtOnceOnExit {
            AccessLog& log;
            ~WriteAtOnceOnExit() { log.defer_writes(nullptr); }
        } write_at_once_on_exit{log};
        shared.policy.set(load_policy_snapshot(options.policy_file));
        const auto& loaded = shared.policy.get()->policy;
        budgets.configure(loaded.budgets, loaded.default_budget);
        nlohmann::json start{{"time", utc_timestamp()},
                             {"event", "start"},
                             {"listen", endpoint_text(bound)},
                             {"pid", ::getpid()},
                             {"max_connections", limits.max_connections},
                             {"max_tunnels", limits.max_tunnels},
                             {"event_loops", loops},
                             {"sandbox_leg_congestion", sandbox_leg_congestion},
                             {"resolve_file_names", resolve_map->size()},
                             {"secrets", secret_count}};
        if (!limits.connection_records) start["connection_records"] = false;  // a bench's proxy (ProxyLimits)
        log.write(start);
        log_policy(log, *shared.policy.get(), "start");

        // Gives up start-up's pages too, before the proxy says it listens:
        // what a caller then sees is the idle proxy.
        server.start(std::move(acceptor));
        if (!options.pid_file.empty())
            core::write_file_atomic(options.pid_file, std::to_string(::getpid()) + "\n", 0644);
        std::printf("listening %s\n", endpoint_text(bound).c_str());
        std::fflush(stdout);

        server.run();
        budgets.save_if_changed();
        log.defer_writes(nullptr);  // flushes what is queued; later lines are written at once
        refusals.tick(RefusalLog::Clock::now(), true);

        if (!options.pid_file.empty()) ::unlink(options.pid_file.c_str());
        if (!server.drained()) {
            // A connection still waits on the resolver's thread; its memory goes with the process.
            std::fflush(nullptr);
            ::_exit(exit_code::k_ok);
        }
        return exit_code::k_ok;
    } catch (const Error& e) {
        std::cerr << "agentctl: " << e.what() << '\n';
        if (!e.hint().empty()) std::cerr << "hint: " << e.hint() << '\n';
        return e.code();
    } catch (const std::exception& e) {
        std::cerr << "agentctl: egress proxy: " << e.what() << '\n';
        return exit_code::k_error;
    }
}

}  // namespace agentctl::egress_proxy
