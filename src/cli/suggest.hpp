// "Did you mean ...?" for mistyped commands and flags.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::cli {

[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `typed` if it is close enough to be a plausible typo
// (edit distance at most 2, or `typed` is a prefix of exactly one candidate).
[[nodiscard]] std::optional<std::string> closest_match(std::string_view typed,
                                                       const std::vector<std::string>& candidates);

}  // namespace agentctl::cli
