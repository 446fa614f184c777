// Typed results of the in-guest confinement probes, shared by the providers.
//
// A probe is one attempt, made from inside the guest, to get around the
// sandbox's network policy (a direct connection, DNS to another server, a
// refused name through the proxy, ...). Each must fail in the way the policy
// says; a probe that succeeds is an escape.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "agentctl/confinement.hpp"

namespace agentctl::provider::common {

// What one connection attempt did.
enum class ProbeKind { Refused, Connected, NoTool, Inconclusive };

struct ProbeOutcome {
    ProbeKind kind = ProbeKind::Inconclusive;
    std::string tool;    // curl | bash | python3 | "" for NoTool
    std::string detail;  // e.g. "curl exit 28"
};

// How one probe of a battery went, judged against what confinement requires.
enum class ProbeVerdict {
    Held,          // the attempt failed the way it must (refused, 403, NXDOMAIN)
    Escaped,       // the attempt succeeded: the sandbox is not confined
    Inconclusive,  // no clear answer (timeout, missing tool)
    Skipped,       // not made here (e.g. it needs a listener on the server, which is not this machine)
};

struct ProbeResult {
    std::string name;  // e.g. "direct-bypass"
    ProbeVerdict verdict = ProbeVerdict::Inconclusive;
    std::string detail;  // one phrase: what was tried and what happened
};

// The text for a verdict: "held", "escaped", "inconclusive", "skipped".
[[nodiscard]] std::string_view to_string(ProbeVerdict verdict);

// Parses lines `agentctl-probe NAME VERDICT DETAIL...` (VERDICT one of held,
// escaped, inconclusive) from a battery's output, in order. Other lines are
// ignored; an unknown verdict word is Inconclusive.
[[nodiscard]] std::vector<ProbeResult> parse_probe_lines(const std::string& output);

struct BatterySummary {
    std::size_t held = 0;
    std::size_t total = 0;  // the probes made (skipped ones are not counted)
    std::vector<const ProbeResult*> skipped;
    std::vector<const ProbeResult*> escaped;       // stop the sandbox
    std::vector<const ProbeResult*> inconclusive;  // "not verified"
};

// Counts `results` against the probe names that were expected: an expected
// probe with no line counts as inconclusive ("printed no result").
[[nodiscard]] BatterySummary summarise(const std::vector<ProbeResult>& results);

// "verified (6/6 probes, 2026-11-30T12:00:00Z)", "not verified (4/6 probes, ...): NAME: detail; ..." or
// "FAILED (...): ..." once rendered; skipped probes are named after the count: "verified (6/6 probes, 1
// skipped: host-port, ...)", then `source_note` when given: "(6/6 probes, reported by the guest, ...)".
[[nodiscard]] ConfinementStatus confinement_line(const BatterySummary& summary,
                                                 std::chrono::system_clock::time_point when,
                                                 std::string_view source_note = {});

// The note for probes the guest ran and reported: its word, which root inside can forge.
inline constexpr std::string_view k_guest_word = "reported by the guest";

}  // namespace agentctl::provider::common
