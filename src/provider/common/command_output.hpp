// How much of a failed command's output an error message quotes, once for
// every provider: the end of it, where installers and package managers say
// what went wrong.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace agentctl::provider::common {

inline constexpr std::size_t k_output_tail_bytes = 2000;

// The last `max_bytes` of `output`, after "..." when it was cut, without the
// trailing line breaks.
[[nodiscard]] std::string output_tail(std::string_view output, std::size_t max_bytes = k_output_tail_bytes);

}  // namespace agentctl::provider::common
