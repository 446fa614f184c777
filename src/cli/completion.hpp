// Shell completion scripts generated from the CLI tree, so they never drift
// from the commands and flags that really exist. Values come from each
// option's type (see value_type in command.hpp): fixed sets and catalog names
// are written into the script; sandboxes and profiles are asked for at TAB
// time through the hidden `agentctl __complete sandboxes|profiles`; files and
// directories use the shell's own file completion, which is also the fallback.
#pragma once

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace agentctl::cli {

// `function` names the bash function (zsh's script uses its own name).
[[nodiscard]] std::string bash_completion(const CLI::App& root, std::string_view function = "_agentctl");
[[nodiscard]] std::string zsh_completion(const CLI::App& root);
[[nodiscard]] std::string fish_completion(const CLI::App& root);

}  // namespace agentctl::cli
