// What `agentctl logs NAME --network` narrows the decision log to: `--since`
// and `--tail`, applied to the lines of every kept file merged in time order.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::egress_proxy {

// `--since`: a duration before `now` (`90s`, `15m`, `2h`, `7d`, or several,
// `1h30m`) or an RFC 3339 time (`2026-01-02T03:04:05Z`, `2026-01-02T03:04:05.5+01:00`,
// `2026-01-02` for its midnight UTC). Returns the time in the log's own form
// (utc_timestamp: UTC, milliseconds), which orders as text. Throws
// agentctl::Error naming the value and the accepted forms when it is neither.
[[nodiscard]] std::string parse_since(std::string_view text, std::chrono::system_clock::time_point now);

// The time a log line was written (its "time" field); empty when it has none.
[[nodiscard]] std::string time_of(const std::string& line);

// Keeps the lines written at or after `since` (empty: all of them; a line
// without a time goes with the one before it), then only the last `tail` of those.
void narrow_lines(std::vector<std::string>& lines, const std::string& since, std::optional<std::size_t> tail);

}  // namespace agentctl::egress_proxy
