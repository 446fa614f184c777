// Wall-clock times as agentctl writes them in state, status and policy files.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace agentctl::core {

// `when` as RFC 3339 in UTC, to the second: "2026-11-30T12:00:00Z".
[[nodiscard]] std::string utc_stamp(std::chrono::system_clock::time_point when);

// Now, in seconds since the epoch (how grant ends are written in policy files).
[[nodiscard]] std::int64_t epoch_seconds_now();

}  // namespace agentctl::core
