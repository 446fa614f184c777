// Shell completion scripts generated from the CLI tree, so they never drift
// from the commands and flags that really exist.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace agentctl::cli {

[[nodiscard]] std::string bash_completion(const CLI::App& root);
[[nodiscard]] std::string zsh_completion(const CLI::App& root);
[[nodiscard]] std::string fish_completion(const CLI::App& root);

}  // namespace agentctl::cli
