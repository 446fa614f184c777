// The command-line front end: parses argv, runs one command, maps every error
// to `agentctl: <message>` and an exit code.
#pragma once

namespace agentctl::cli {

[[nodiscard]] int run(int argc, char** argv);

}  // namespace agentctl::cli
