// Talking to the Incus daemon: the REST API over its unix socket, or over
// HTTPS to a remote server (remote.hpp).
//
// Layered like Incus's own Go client:
//   Transport      one raw HTTP request/response over the socket (unix_transport.cpp)
//                  or over TLS with a client certificate (tls_transport.cpp)
//   Client         one API call: sends, parses the envelope
//                  {type: sync|async|error, status_code, error_code, error, operation, metadata},
//                  turns an error envelope into agentctl::Error with Incus's text and a hint,
//                  and waits on operations (GET /1.0/operations/ID/wait?timeout=N)
//   api.hpp        typed helpers (instances, networks, ACLs, exec, ...)
//
// Two Client implementations: the real one (make_client) and the preview one
// (make_preview_client), which prints every call as a runnable
// `incus query -X METHOD --data '<json>' /1.0/...` line instead of sending it
// (`REMOTE:/1.0/...` for a remote, the syntax of the incus client).
// Everything above the Client builds the same calls in both modes.
#pragma once

#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"

namespace agentctl::provider::incus {

using Json = nlohmann::json;

// One raw HTTP exchange.
struct HttpResponse {
    int status = 0;
    std::string content_type;
    std::string body;
};

// One raw connection to the daemon (for an exec operation's websockets):
// blocking reads and writes, used by one thread, except shutdown().
class ByteStream {
public:
    virtual ~ByteStream() = default;
    // Reads at least one byte; 0 at the end of the stream or on an error.
    virtual std::size_t read_some(char* out, std::size_t size) = 0;
    // Writes all of `data`; false when the connection is gone.
    virtual bool write_all(const char* data, std::size_t size) = 0;
    // Ends the connection; a read_some blocked on another thread returns 0.
    virtual void shutdown() = 0;
};

class Transport {
public:
    virtual ~Transport() = default;
    // Sends one request and returns the whole response. `target` is the path
    // and query (`/1.0/instances?recursion=1`). Throws agentctl::Error naming the
    // socket or server when it cannot connect or the connection breaks (and,
    // over TLS, when the server's certificate is not the trusted one).
    // Each request has a connection of its own: several threads may send at once.
    virtual HttpResponse send(std::string_view method, std::string_view target, std::string_view body,
                              std::string_view content_type) = 0;
    // Opens one connection (TLS handshake done) for a websocket upgrade.
    // Throws like send().
    virtual std::unique_ptr<ByteStream> open_stream() = 0;
    // Where requests go, for messages (`/var/lib/incus/unix.socket`,
    // `https://203.0.113.5:8443 (remote build)`).
    [[nodiscard]] virtual std::string endpoint() const = 0;
};

// The environment variable `name` from `env` (nullptr = the process
// environment); empty when unset. The incus client's lookups go through it.
[[nodiscard]] std::string env_value(const std::map<std::string, std::string>* env, const char* name);

// How the socket was found, and the project to use (the per-user socket
// restricts a user to the `user-<uid>` project).
struct SocketLocation {
    std::string path;
    std::string project;  // empty: the daemon's default project
    std::string source;   // "$INCUS_SOCKET", "$INCUS_DIR", "/var/lib/incus", ... for messages
};

// Finds the daemon's socket the way the `incus` client does: $INCUS_SOCKET;
// $INCUS_DIR/unix.socket; /run/incus/unix.socket if it exists;
// /var/lib/incus/unix.socket. When that socket exists but is not writable and
// its sibling `unix.socket.user` is (the incus-user daemon), the user socket is
// used with project `user-<uid>`. `env` maps variable names to values
// (nullptr = read the process environment).
[[nodiscard]] SocketLocation find_socket(const std::map<std::string, std::string>* env = nullptr);

// The real transport: HTTP/1.1 over the unix socket (Boost.Beast), one
// connection per request. `timeout` bounds connect + request + response.
[[nodiscard]] std::unique_ptr<Transport> make_unix_transport(std::string socket_path, int timeout_seconds = 120);

struct HttpsRemote;
// The HTTPS transport to a remote (remote.hpp): TLS with the client's
// certificate, the server's certificate pinned as remote.hpp says, one
// connection per request. Throws agentctl::Error when a certificate file
// cannot be read.
[[nodiscard]] std::unique_ptr<Transport> make_tls_transport(const HttpsRemote& remote, int timeout_seconds = 120);

enum class ResponseType { Sync, Async, Error };

// The envelope every Incus API response is wrapped in.
struct Response {
    ResponseType type = ResponseType::Sync;
    int status_code = 0;
    int error_code = 0;
    std::string error;
    std::string operation;  // for async: /1.0/operations/ID
    Json metadata;
};

// Parses an envelope; throws agentctl::Error when the body is not one.
[[nodiscard]] Response parse_envelope(std::string_view body, int http_status);

// The hint shown under an Incus error, chosen from its text and code
// (instance not found, port in use, VMs not supported here, permission, ...).
// Empty when nothing useful can be said.
[[nodiscard]] std::string hint_for_incus_error(std::string_view error, int code);

// The `status` of an Incus instance or operation (Incus's shared/api status
// codes by name), read in one place.
enum class IncusStatus { Running, Pending, Stopped, Frozen, Success, Failure, Cancelled, Other };
[[nodiscard]] IncusStatus incus_status_named(std::string_view name);
[[nodiscard]] IncusStatus incus_status(const Json& object);
// An operation that has not finished yet.
[[nodiscard]] inline bool operation_in_progress(const Json& operation) {
    const auto status = incus_status(operation);
    return status == IncusStatus::Running || status == IncusStatus::Pending;
}

// The string value of `key` in an Incus object's config (network, ACL); empty
// when it has none. (An instance's is Instance::config_value, instance.hpp.)
[[nodiscard]] std::string config_text(const Json& object, std::string_view key);

class Client {
public:
    virtual ~Client() = default;

    // The real client's calls may run on several threads at once (each is one
    // request of the Transport's); the preview client's may not.
    // One API call. `body` null = no body. Returns the envelope of a sync or
    // async response; an error envelope throws agentctl::Error carrying
    // Incus's text, the call (`POST /1.0/instances`) and a hint.
    // A 404 throws NotFound so callers can tolerate an absent object.
    virtual Response query(std::string_view method, std::string_view path, const Json* body = nullptr) = 0;

    // Waits up to `timeout_seconds` for an operation (`/1.0/operations/ID` or its
    // ID) and returns the operation object: status "Success" (its `metadata`
    // holds the result, e.g. `return` and `output` of an exec) or still
    // "Running"/"Pending" when the time ran out. Throws agentctl::Error with the
    // operation's `err` when it failed or was cancelled.
    virtual Json wait(std::string_view operation, int timeout_seconds) = 0;

    // GET of a non-JSON resource (exec output logs, files). Throws like query().
    virtual std::string get_raw(std::string_view path) = 0;

    // POST of a non-JSON body (file push: application/octet-stream). Throws
    // like query().
    virtual void post_raw(std::string_view path, std::string_view data, std::string_view content_type) {
        (void)data, (void)content_type;
        throw Error(fmt::format("this Incus client cannot send POST {}", path));
    }

    // True for the preview client: nothing is sent, GETs return empty results.
    [[nodiscard]] virtual bool preview() const = 0;

    // The transport the daemon is reached through, for the websockets of an
    // exec operation (exec_stream.hpp); null when there is none (preview).
    [[nodiscard]] virtual Transport* transport() { return nullptr; }
};

// What a refusal from Incus means to a caller that could try again. Incus
// gives these cases no code of their own (they arrive as 400, like "Instance
// is running", which waiting does not cure), so Incus's own error text decides,
// read here once:
//   Busy:  another operation holds the instance ("Instance is busy running a
//          \"create\" operation", Incus's instance operation lock);
//   InUse: the object is still used by another ("The network is currently in
//          use", networkDelete; likewise a network ACL);
//   InterfaceGone: a bridge's set-up (create, config change) or tear-down
//          lists every network interface on the host and then runs
//          `ip -d -j link show` on each; one that went away meanwhile (another
//          bridge deleted, an instance's veth moved or removed, any program's
//          veth pair) fails the step
//          with "Failed to delete bridge children interfaces: ... Device ...
//          does not exist" (Incus 6.0, bridge deleteChildren). Nothing was
//          changed: a create is reverted, a delete left the bridge whole.
// Running: Incus deletes only stopped instances, and this one was started
// (by an operation another client asked for) after it was last read.
enum class IncusRefusal { Other, Busy, InUse, InterfaceGone, Running };
[[nodiscard]] IncusRefusal classify_refusal(std::string_view incus_error);

// An error envelope or a failed operation from the daemon, with Incus's code
// (the envelope's error_code, else the HTTP status; a failed operation's
// status_code). It is an agentctl::Error, so an uncaught one still reads well.
class IncusError : public Error {
public:
    IncusError(std::string message, std::string hint, int status, IncusRefusal refusal = IncusRefusal::Other)
        : Error(std::move(message), std::move(hint)), m_status(status), m_refusal(refusal) {}

    [[nodiscard]] int status() const noexcept { return m_status; }
    [[nodiscard]] IncusRefusal refusal() const noexcept { return m_refusal; }
    // Worth asking again shortly: the instance is busy or started meanwhile,
    // the object still in use, or a host interface went away while Incus listed them.
    [[nodiscard]] bool transient() const noexcept { return m_refusal != IncusRefusal::Other; }

private:
    int m_status = 0;
    IncusRefusal m_refusal = IncusRefusal::Other;
};

// Thrown by Client::query for a 404, so that delete can tolerate absent pieces.
class NotFound : public IncusError {
public:
    explicit NotFound(std::string message, std::string hint = {})
        : IncusError(std::move(message), std::move(hint), 404) {}
};

// The real client over a transport. `project` is appended as ?project=P when set.
[[nodiscard]] std::unique_ptr<Client> make_client(std::unique_ptr<Transport> transport, std::string project = {});

// The preview client: prints `incus query -X METHOD [--data JSON] [REMOTE:]PATH` lines to `out`
// (built with agentctl::shell_join) and returns empty results: sync, metadata
// null for GETs, and an async envelope whose wait() returns an empty object.
// The preview client prints every call. It also remembers what the printed
// writes would do to instances (create, config patches, PUTs, state changes,
// delete), so later reads in the same run see the sandbox the real run would
// have: a preview create shows its package and agent installs and its mount
// report. Reads of instances, networks and network ACLs it has not written,
// of the server (/1.0, its cluster members) and of images go to `reader` (a
// real client; reading changes nothing) when given and the daemon answers, so
// a preview start, view or policy change works from the sandbox as it is, and
// a preview create is refused where the real one would be (no VM driver, an
// image missing or lacking an agent's tools). Other reads, and every read without an answer, return
// null metadata.
// `remote` (empty: the local daemon) prefixes every path as `REMOTE:/1.0/...`.
[[nodiscard]] std::unique_ptr<Client> make_preview_client(std::ostream& out, std::string project = {},
                                                          std::unique_ptr<Client> reader = nullptr,
                                                          std::string remote = {});

// The `incus query` argv for one call, exactly as preview prints it.
[[nodiscard]] std::vector<std::string> query_argv(std::string_view method, std::string_view path, const Json* body,
                                                  std::string_view project, std::string_view remote = {});

}  // namespace agentctl::provider::incus
