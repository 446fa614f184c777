// Which Incus server the provider talks to, and whether it is this machine.
//
// No remote chosen: the local daemon over its unix socket, as the incus
// client finds it (find_socket). `--remote NAME` (which wins) or the setting
// incus.remote=NAME: the remote of that name in the incus client's own
// configuration (remote.hpp), over HTTPS or a unix socket. The project is
// `--project NAME` (which wins) or incus.project, else the remote's own.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "agentctl/host_network.hpp"
#include "agentctl/policy.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/client/remote.hpp"

namespace agentctl::provider::incus {

struct Server {
    std::string remote;                    // the remote's name; empty: none chosen (the local socket)
    std::string project;                   // empty: the daemon's default project
    std::optional<SocketLocation> socket;  // reached over a unix socket
    std::optional<HttpsRemote> https;      // reached over HTTPS
    // The daemon runs on the machine agentctl runs on, so that host paths,
    // host ports, the bridge's host address and nftables are the server's too.
    bool this_machine = true;

    // Where requests go, for -v and messages: "unix socket /var/lib/incus/unix.socket
    // (found via /var/lib/incus)", "remote build at https://203.0.113.5:8443",
    // followed by ", project NAME" outside the default project.
    [[nodiscard]] std::string describe() const;
};

// The one place that decides whether a server is this machine: a unix socket
// is; an HTTPS remote is when its host resolves, every address of it, to a
// loopback address or one of this host's own addresses
// (policy::host_own_addresses). A name that does not resolve is not.
[[nodiscard]] bool is_this_machine(const std::string& host, policy::Resolver& resolver,
                                   std::span<const policy::IpAddress> own_addresses);
// The rule for one address: loopback, or one of `own_addresses`.
[[nodiscard]] bool is_this_machine(const policy::IpAddress& address, std::span<const policy::IpAddress> own_addresses);

// Resolves the server from the provider's settings (`incus.remote` and
// `incus.project`, which the CLI sets from --remote and --project). Throws agentctl::Error for an unknown or unusable
// remote (remote.hpp).
[[nodiscard]] Server locate_server(const std::map<std::string, std::string>& settings, const IncusConfigDirs& dirs);

// The transport to `server`.
[[nodiscard]] std::unique_ptr<Transport> make_transport(const Server& server, int timeout_seconds = 120);

}  // namespace agentctl::provider::incus
