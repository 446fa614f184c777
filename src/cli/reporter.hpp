// The terminal side of agentctl::Reporter: progress steps (a spinner on a
// terminal, plain lines otherwise, nothing with --output json), notices and
// warnings on stderr. Colour only on a terminal and never with NO_COLOR.
#pragma once

#include <memory>

#include "agentctl/provider.hpp"

namespace agentctl::cli {

[[nodiscard]] std::unique_ptr<Reporter> make_terminal_reporter(bool json);

// True when stderr is a terminal and NO_COLOR is not set.
[[nodiscard]] bool use_color();

}  // namespace agentctl::cli
