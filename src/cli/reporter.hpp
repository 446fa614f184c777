// The terminal side of agentctl::Reporter: progress steps (a spinner on a
// terminal, plain lines otherwise, nothing with --output json), notices and
// warnings on stderr. Colour only on a terminal and never with NO_COLOR.
//
// A step ends when the next step, notice or warning begins (shown "ok"), or
// when the command fails: fail_step() marks the running step failed, so the
// error that follows stands on its own line under it.
#pragma once

#include <memory>

#include "agentctl/provider.hpp"

namespace agentctl::cli {

[[nodiscard]] std::unique_ptr<Reporter> make_terminal_reporter(bool json);

// True when stderr is a terminal and NO_COLOR is not set.
[[nodiscard]] bool use_color();

}  // namespace agentctl::cli
