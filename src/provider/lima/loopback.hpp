// Small loopback-socket helpers: is a port free, is something listening, and a
// canary listener that records whether anything connected to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>

namespace agentctl::provider::lima {

// Per-instance pinned ports live in 49152-65535 (the dynamic range).
inline constexpr std::uint16_t k_port_low = 49152;
inline constexpr std::uint16_t k_port_high = 65535;

// True when 127.0.0.1:port can be bound right now.
[[nodiscard]] bool loopback_port_free(std::uint16_t port);
// True when a TCP connection to 127.0.0.1:port is accepted.
[[nodiscard]] bool loopback_port_listening(std::uint16_t port);

// A free port in 49152-65535, starting at a point derived from `seed` (so one
// instance tends to get the same port) and skipping `taken`. Throws
// agentctl::Error when the whole range is busy.
[[nodiscard]] std::uint16_t pick_loopback_port(const std::string& seed, const std::set<std::uint16_t>& taken);

// A listener on 127.0.0.1 (ephemeral port) that only counts connections: the
// in-guest confinement probe aims at it, so a connection that arrives proves
// the guest got out. Nothing is ever read or written.
class CanaryListener {
public:
    CanaryListener();
    ~CanaryListener();
    CanaryListener(const CanaryListener&) = delete;
    CanaryListener& operator=(const CanaryListener&) = delete;

    [[nodiscard]] std::uint16_t port() const { return m_port; }
    // Accepts (without blocking) every pending connection; true if any arrived
    // since construction.
    [[nodiscard]] bool connected();

private:
    int m_fd = -1;
    std::uint16_t m_port = 0;
    bool m_seen = false;
};

}  // namespace agentctl::provider::lima
