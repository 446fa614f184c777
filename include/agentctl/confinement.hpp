// What is known about a sandbox's network confinement, as `status` reports it
// and the providers record it: a state, and the rest of the line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

enum class ConfinementState {
    Unknown,      // nothing recorded (the sandbox has not been checked, or is stopped)
    Verified,     // "verified": every probe held
    NotVerified,  // "not verified": no clear answer, or no probe could run
    Failed,       // "FAILED": a probe got out
    Off,          // "off": the sandbox has no network policy
    None,         // "none": nothing enforces the policy now
};

struct ConfinementStatus {
    ConfinementState state = ConfinementState::Unknown;
    // What follows the state's word: a parenthesised summary
    // "(6/6 probes, 2026-11-30T12:00:00Z)" or a sentence "preview".
    std::string detail;

    // Nothing is known: the line is empty.
    [[nodiscard]] bool empty() const { return state == ConfinementState::Unknown && detail.empty(); }
    friend bool operator==(const ConfinementStatus&, const ConfinementStatus&) = default;
};

// How one probe of the confinement battery went (as recorded).
struct ProbeRecord {
    std::string name;     // e.g. "direct-bypass"
    std::string verdict;  // held | escaped | inconclusive | skipped
    std::string detail;   // what was tried and what happened
};

// What the confinement line rests on, for `status` (typed, beside the line).
struct ConfinementEvidence {
    std::string checked_at;  // when the probes last ran (RFC 3339, UTC); empty: never
    // Who made the probes: "host" (agentctl, from the host, in the sandbox's
    // network namespace) or "guest" (a battery run inside the guest: its word).
    std::string source;
    std::vector<ProbeRecord> probes;
    // What enforces the policy and is not in place now (checked at status
    // time), each as a sentence; empty when all of it is.
    std::vector<std::string> missing;
};

// The line: the state's word, then a detail that opens with '(' after a space
// ("verified (6/6 probes, ...)") or any other after ": " ("not verified:
// preview"); the word alone without a detail. Unknown: the detail alone.
[[nodiscard]] std::string to_string(const ConfinementStatus& status);

// Reads a line to_string() wrote, as recorded in an instance's config or a
// state file. A line that does not start with a state's word is Unknown, with
// the whole line as its detail (so to_string gives it back unchanged).
[[nodiscard]] ConfinementStatus parse_confinement(std::string_view line);

}  // namespace agentctl
