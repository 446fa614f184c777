// The manual page agentctl(1), generated from the CLI tree so that it lists
// exactly the commands, flags and examples that exist. The build runs the
// hidden `agentctl man` to write it; `cmake --install` installs it.
#pragma once

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace agentctl::cli {

[[nodiscard]] std::string man_page(const CLI::App& root, std::string_view version);

}  // namespace agentctl::cli
