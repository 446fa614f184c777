// Installing a sandbox's coding agent (`create --agent NAME`), the parts every
// provider shares. An install has three steps, each run in the guest as the
// sandbox user: the tools the installer needs are looked up, the installer
// runs (bash with pipefail, so a failed download fails it), and the agent's
// command must then run (`AGENT --version`) with the PATH `agentctl exec`
// gives and in a login shell. Only then is the agent recorded as installed.
// A failed step is reported one way: the step, and the end of its output.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentctl/error.hpp"
#include "policy/catalog.hpp"

namespace agentctl::provider::common {

// The steps of an install, as named in errors.
inline constexpr std::string_view k_step_tools = "looking up the tools the installer needs";
inline constexpr std::string_view k_step_installer = "running the installer";

// The installer as a command line: bash -o pipefail -c INSTALL_COMMAND.
[[nodiscard]] std::vector<std::string> agent_install_argv(const policy::Agent& agent);

// A script that prints each tool of agent.needs it cannot find, one a line,
// and exits 1 when one is missing.
[[nodiscard]] std::string agent_tools_script(const policy::Agent& agent);
// The tools the script above printed.
[[nodiscard]] std::vector<std::string> parse_missing_tools(std::string_view output);

// The tools of agent.needs that an image carrying `image_packages` (Debian
// package names) and given `extra_packages` (neutral names, --package)
// lacks. nullopt: the image does not say what it carries.
[[nodiscard]] std::optional<std::vector<std::string>> tools_missing_from_image(
    const policy::Agent& agent, const std::optional<std::string>& image_packages,
    const std::vector<std::string>& extra_packages);

// A script that makes agent.binary reachable (linking a vendor's own install
// directory into ~/.local/bin) and runs `BINARY --version` on the PATH it is
// given and then in the user's login shell. Exit 0 prints the version; a
// failure exits with a code agent_check_step() names and prints why.
[[nodiscard]] std::string agent_check_script(const policy::Agent& agent);
[[nodiscard]] std::string agent_check_step(const policy::Agent& agent, int exit_code);

// The error for tools the installer of `agent` needs and `where` lacks; it
// says how to get them.
[[nodiscard]] Error agent_tools_missing(std::string_view agent, std::string_view where,
                                        const std::vector<std::string>& tools);

// The error for an install of `agent` in `sandbox` that failed at `step` with
// `exit_code`: it quotes output_tail(output). `retry_hint` ends the hint (what
// the caller does with the sandbox: removed, kept, retried on start).
[[nodiscard]] Error agent_install_failed(std::string_view agent, std::string_view sandbox, std::string_view step,
                                         int exit_code, std::string_view output, std::string_view retry_hint);

}  // namespace agentctl::provider::common
