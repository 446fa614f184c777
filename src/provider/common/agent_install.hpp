// Installing a sandbox's coding agent (`create --agent NAME`), the parts every
// provider shares: the command comes from the policy module's agent table,
// and a failed install is reported one way, with the end of the installer's
// stderr. Each provider runs the command in its guest as the sandbox user
// with its own shell, and records the agent as installed only once it
// succeeded, so that the next start retries.
#pragma once

#include <string>
#include <string_view>

#include "agentctl/error.hpp"

namespace agentctl::provider::common {

// The shell command that installs `agent`; throws agentctl::Error naming the
// known agents for an unknown one.
[[nodiscard]] std::string agent_install_command(std::string_view agent);

// The error for an install of `agent` in `sandbox` that exited with
// `exit_code`: it quotes output_tail(err) and says that
// `agentctl start SANDBOX` retries.
[[nodiscard]] Error agent_install_failed(std::string_view agent, std::string_view sandbox, int exit_code,
                                         std::string_view err);

}  // namespace agentctl::provider::common
