// The in-guest confinement check run after every confined boot.
//
// The guest tries a direct connection (proxy variables unset) to the host
// gateway on a port where agentctl itself listens on the host loopback (a
// CanaryListener). The sandbox profile does not allow that port, so the
// hostagent's connection must be refused. Nothing outside the machine is
// contacted. The first tool present is used: curl, else bash with timeout,
// else python3. The script prints exactly one line starting `agentctl-probe: `.
#pragma once

#include <cstdint>
#include <string>

#include "provider/common/probes.hpp"

namespace agentctl::provider::lima {

// A one-line POSIX sh script; it starts by setting host and port: `h=HOST; p=PORT; ...`.
// `port` is text so that --preview can show a placeholder for the canary's
// ephemeral port.
[[nodiscard]] std::string probe_script(const std::string& host, const std::string& port);

// The outcome types are shared with the Incus provider's probe battery.
using common::ProbeKind;
using common::ProbeOutcome;

// Reads the script's marker line from the guest command's stdout. Missing or
// unknown output is Inconclusive with the exit code in the detail.
[[nodiscard]] ProbeOutcome parse_probe_output(const std::string& out, int exit_code);

enum class Verdict { Verified, NotVerified, Escaped };

struct Confinement {
    Verdict verdict = Verdict::NotVerified;
    std::string reason;  // completes "network confinement verified: ..." / "not verified: ..."
};

// Combines the guest's report with what the canary saw on the host: a
// connection that reached the canary is an escape whatever the guest said.
[[nodiscard]] Confinement judge_probe(const ProbeOutcome& outcome, bool canary_connected, const std::string& host,
                                      std::uint16_t port);

}  // namespace agentctl::provider::lima
