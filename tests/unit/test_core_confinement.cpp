// agentctl/confinement.hpp: a confinement state renders as the line `status`
// prints, and a recorded line reads back as the same state.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "agentctl/confinement.hpp"

using agentctl::ConfinementState;
using agentctl::ConfinementStatus;
using agentctl::parse_confinement;

TEST_CASE("a confinement state renders as its word and its detail") {
    CHECK(to_string(ConfinementStatus{ConfinementState::Verified, "(6/6 probes, 2026-11-30T12:00:00Z)"}) ==
          "verified (6/6 probes, 2026-11-30T12:00:00Z)");
    CHECK(to_string(ConfinementStatus{ConfinementState::NotVerified, "preview"}) == "not verified: preview");
    CHECK(to_string(ConfinementStatus{ConfinementState::Failed, "(1/3 probes, x): dns: escaped"}) ==
          "FAILED (1/3 probes, x): dns: escaped");
    CHECK(to_string(ConfinementStatus{ConfinementState::Off, "(created with --no-network-policy)"}) ==
          "off (created with --no-network-policy)");
    CHECK(to_string(ConfinementStatus{ConfinementState::None, "nothing enforces it"}) == "none: nothing enforces it");
    CHECK(to_string(ConfinementStatus{ConfinementState::Verified, ""}) == "verified");
    CHECK(to_string(ConfinementStatus{}).empty());
    CHECK(ConfinementStatus{}.empty());
}

TEST_CASE("a recorded confinement line reads back as the state that wrote it") {
    CHECK(parse_confinement("verified (2/2 probes, 2025-11-30T12:00:00Z)") ==
          ConfinementStatus{ConfinementState::Verified, "(2/2 probes, 2025-11-30T12:00:00Z)"});
    CHECK(parse_confinement("verified: a direct connection was refused") ==
          ConfinementStatus{ConfinementState::Verified, "a direct connection was refused"});
    CHECK(parse_confinement("not verified: preview") == ConfinementStatus{ConfinementState::NotVerified, "preview"});
    CHECK(parse_confinement("off: the sandbox has no network policy (--no-network-policy)").state ==
          ConfinementState::Off);
    CHECK(parse_confinement("FAILED (1/3 probes, x): y").state == ConfinementState::Failed);
    CHECK(parse_confinement("none: the Incus server is not this machine").state == ConfinementState::None);
    CHECK(parse_confinement("").empty());
    // Anything else is kept whole, unknown, and printed back as it was.
    for (std::string line : {"verifiedx", "nonesuch", "verified:", "verified: (odd)", "something else"}) {
        INFO(line);
        CHECK(parse_confinement(line).state == ConfinementState::Unknown);
        CHECK(to_string(parse_confinement(line)) == line);
    }
    const std::vector<std::string> lines{"verified (6/6 probes, 1 skipped: host-port, 2026-11-30T12:00:00Z)",
                                         "not verified (4/6 probes, t): a: b; c: d",
                                         "off (created with --no-network-policy)",
                                         "none: the running hostagent was not started by agentctl",
                                         "verified",
                                         "not verified: cannot listen on 10.0.0.1: Address in use"};
    for (const auto& line : lines) CHECK(to_string(parse_confinement(line)) == line);
}
