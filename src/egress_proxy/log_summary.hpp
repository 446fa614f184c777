// `agentctl logs NAME --network --summary`: the decision log folded into one
// row per destination (host:port): the connections that ended, the bytes they
// moved each way, when the destination was first and last seen, and the
// requests refused with their reasons.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace agentctl::egress_proxy {

struct DestinationSummary {
    std::string host;  // empty: refusals of requests that named no destination
    std::uint16_t port = 0;
    std::uint64_t connections = 0;  // close records: connections that ended
    std::uint64_t bytes_up = 0;
    std::uint64_t bytes_down = 0;
    std::string first_seen;  // RFC 3339 UTC, as the log writes it
    std::string last_seen;
    std::map<std::string, std::uint64_t> endings;  // how the connections ended (record::Ending)
    std::uint64_t refusals = 0;
    std::map<std::string, std::uint64_t> refusal_reasons;
};

// Folds JSON Lines of the decision log (any order; malformed lines are
// skipped). Refusals counted in a `refusals-suppressed` line carry no
// destination: they are added to the row without a host. Rows: most bytes
// first, then most refusals, then by destination.
[[nodiscard]] std::vector<DestinationSummary> summarise_log(const std::vector<std::string>& lines);

// The rows as a table, or with `json` one JSON object per line (typed fields:
// numbers as numbers, times as RFC 3339 strings).
void print_summary(const std::vector<DestinationSummary>& rows, bool json, std::ostream& out);

}  // namespace agentctl::egress_proxy
