// The egress proxy: the per-sandbox HTTP/HTTPS proxy that applies a sandbox's
// network policy on the host (Lima backend). agentctl runs it as the hidden
// `agentctl egress-proxy` verb; `agentctl logs NAME --network` reads its log.
//
// This header is the whole surface the CLI needs. It pulls in no Asio headers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "agentctl/provider.hpp"

namespace agentctl::egress_proxy {

using agentctl::LogRequest;

// Event loops one proxy runs at most: each sandbox has a proxy of its own.
inline constexpr std::size_t k_max_event_loops = 4;

// SO_SNDBUF and SO_RCVBUF asked for on the proxy's sockets (the kernel
// doubles them for its bookkeeping), which bound the host TCP memory a
// tunnel whose peer never reads can pin (over 6 MiB each with the kernel's
// autotuning, docs/security.md). The sandbox leg (both ways, from the
// listener) and the destination leg's send buffer: that much is queued for a
// peer that stops reading; the sandbox leg never leaves this machine, so its
// small window still fills it.
inline constexpr int k_socket_buffer_bytes = 256 * 1024;
// The destination leg's receive buffer, set before connect: the window a
// download from a distant host gets (about 1 MiB: some 80 Mbit/s at 100 ms
// round trip), and what a sandbox that stops reading a download pins there.
inline constexpr int k_destination_receive_bytes = 1024 * 1024;

// Bounds that keep one misbehaving client from exhausting the proxy.
struct ProxyLimits {
    // Concurrent client connections; further clients wait in the kernel's
    // accept queue. Clamped at start to what RLIMIT_NOFILE allows (each
    // connection needs two descriptors, plus two pipes while data moves).
    std::size_t max_connections = 16384;
    // Connections open from the proxy to destinations at once (CONNECT
    // tunnels and plain-HTTP upstream connections): each can pin about 1 MiB
    // of the host's TCP memory when the destination stops reading, 2.5 MiB
    // when the sandbox does (the socket buffers above). Beyond it a new
    // destination is answered 503 tunnel-limit.
    std::size_t max_tunnels = 256;
    // A client must send a complete request head within this time (slowloris).
    std::chrono::milliseconds header_timeout{10'000};
    // Upstream connect timeout; expiry answers 504.
    std::chrono::milliseconds connect_timeout{10'000};
    // A tunnel or keep-alive connection with no bytes either way is closed.
    std::chrono::milliseconds idle_timeout{15 * 60 * 1000};
    // Largest request head (request line + headers) accepted; more answers 431.
    std::size_t max_header_bytes = 32 * 1024;
    // The log is rotated when it would grow past this size; one old file is kept (`LOG.1`).
    std::uint64_t log_max_bytes = 10 * 1024 * 1024;
    // How often the policy file's mtime/inode is polled for changes.
    std::chrono::milliseconds policy_poll{1000};
    // Once no connection has been open or accepted for this long (checked at
    // each policy poll), the proxy gives up its mappings of the code and
    // read-only data the last connections ran (release_unwritten_file_pages),
    // as it does after start-up, so an idle proxy stays small. The next
    // connection maps the pages it needs again from the page cache.
    std::chrono::milliseconds idle_release{60'000};
    // Event loops (threads) serving connections; 0: one per CPU the process
    // may run on (its affinity mask). At most k_max_event_loops either way.
    std::size_t event_loops = 0;
    // Writes the per-connection records: the `decision` line of each allowed
    // request and the `close` record of each connection to a destination.
    // Off only in the benches (egress_proxy_runner --no-records), to measure
    // what the records cost: then neither line is written, the close record
    // not even built; refusals, the policy lines and upload budgets are kept.
    // The hidden verb has no flag for it (proxy_arguments.hpp): a sandbox's
    // proxy always records.
    bool connection_records = true;
};

struct ProxyOptions {
    // `ADDRESS:PORT`, e.g. `127.0.0.1:50123` or `[::1]:50123`: loopback, or an
    // address of an agentctl sandbox bridge (`agc-...`). Port 0 picks a free
    // port; the chosen address is printed on stdout as `listening ADDRESS:PORT`.
    std::string listen;
    // The policy file (policy::to_policy_file JSON). Missing or malformed means
    // deny everything (logged loudly); the proxy keeps running and re-reads it.
    std::string policy_file;
    // Optional: written (atomically) once listening, removed on SIGTERM/SIGINT.
    std::string pid_file;
    // Optional: decision log (JSON Lines, rotated). Empty: log lines go to stderr.
    std::string log_file;
    // Optional: /etc/hosts-format name->address map consulted before the system resolver.
    std::string resolve_file;
    // Sandbox name used in the 403 hint (`agentctl policy add NAME host:port`).
    // Empty: the name of the policy file's directory (lima/NAME/egress-policy.json).
    std::string sandbox_name;
    // Optional: a descriptor (a pipe) the proxy reads its secrets and the
    // sandbox CA from at start, to its end, then closes (secret_injection.hpp);
    // -1: none. Secrets never come by argument, environment or file: the proxy
    // holds them in memory only, and makes itself non-dumpable first.
    int secrets_fd = -1;
    // Optional, with secrets: a Unix socket path the proxy listens on for new
    // values while it runs (`secret set`, secret_rotation.hpp); root only.
    std::string secrets_socket;
    // Optional, with secrets_socket: one more uid that may hand new values,
    // the user agentctl runs as where the proxy runs as that same user and
    // that user owns the secret store anyway (Lima); -1: root only (Incus,
    // whose proxies run as a user of their own).
    long secrets_peer_uid = -1;
    // Optional, for test origins only (agentctl never sets it by default): a
    // CA file trusted besides the system's trust store for terminated hosts.
    std::string upstream_ca_file;
    // The proxy runs alone in a companion instance whose only network is the
    // sandbox's bridge (Incus instance placement): it may listen on any one
    // address of that instance's own interfaces (never on all of them).
    bool companion = false;
    // Optional, in a companion instance: the Incus server's own
    // /proc/net/fib_trie, mounted read-only. Every address the server
    // delivers to itself at the moment of a connection is refused as
    // host-address (policy::make_server_route_table); a table that cannot be
    // read refuses every connection.
    std::string server_routes;
    ProxyLimits limits;
};

// Runs the proxy in the foreground until SIGTERM or SIGINT: stops accepting,
// closes tunnels, writes every queued log line, removes the pid file, returns
// 0. SIGHUP, or a changed policy file, reloads the policy atomically and
// closes the open tunnels and keep-alive connections it no longer allows.
// Returns 1 after printing `agentctl: ...` on stderr when it cannot start
// (bad --listen, an address that is neither loopback nor on an agentctl
// sandbox bridge, address in use, unreadable resolve file).
int run_egress_proxy(const ProxyOptions& options);

// `agentctl logs NAME --network`: prints the decision log at `log_path`.
// Default: a readable table (time, client, method, destination, decision,
// rule or reason); `json`: the raw JSON Lines. `since` and `tail` narrow the
// lines printed first (log_query.hpp); `summary` prints one row per
// destination instead (log_summary.hpp). `follow`: keeps printing new lines,
// across rotation, until SIGINT/SIGTERM. A missing log prints nothing and
// returns 0 (the proxy has not run yet) unless following. Returns the exit
// code; malformed lines are shown as-is in table mode, never fatal.
int print_network_log(const std::string& log_path, const LogRequest& request, std::ostream& out);

// Every file of the decision log at `log_path`, each one's rotated file
// first: PATH.1, PATH, PATH.refused.1, PATH.refused (the refusals are kept
// apart, refusal_log.hpp). print_network_log reads them all.
[[nodiscard]] std::vector<std::string> kept_log_files(const std::string& log_path);

}  // namespace agentctl::egress_proxy
