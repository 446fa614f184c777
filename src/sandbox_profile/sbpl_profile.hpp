// The macOS sandbox (Seatbelt, SBPL) profile that `limactl start` runs under.
//
// Pure: text in, text out. The profile allows everything except outbound
// network connections; outbound it allows only
//   - TCP to the instance's SSH forward and egress proxy on the host loopback
//     (Seatbelt accepts only `localhost` or `*` as the host of `remote ip`),
//   - Unix-domain sockets under Lima's home (the hostagent's own sockets),
//   - the system resolver's socket, unless the host resolver is switched off.
// Everything the hostagent (and so the guest) tries beyond that is refused.
#pragma once

#include <cstdint>
#include <string>

namespace agentctl::sandbox_profile {

struct SbplOptions {
    std::string instance;          // for the comment header only
    std::uint16_t ssh_port = 0;    // the instance's pinned ssh.localPort
    std::uint16_t proxy_port = 0;  // the instance's egress proxy
    // Lima's home ($LIMA_HOME or ~/.lima): Unix sockets below it stay usable.
    std::string lima_home;
    // false: network.dns.disabled — the hostagent may not ask the system
    // resolver anything (Lima's hostResolver is switched off as well).
    bool host_resolver = true;
};

// The profile text. Throws agentctl::Error when a port is 0 or lima_home is
// not an absolute path or contains a character SBPL strings cannot hold.
[[nodiscard]] std::string generate_sbpl(const SbplOptions& options);

// The same profile on one line, comments dropped, for `sandbox-exec -p` (so
// that --preview prints one command per line).
[[nodiscard]] std::string compact_sbpl(const std::string& profile);

}  // namespace agentctl::sandbox_profile
