// How a CLI verb plugs into the app: one file per verb, each exposing a
// register function listed in the table in commands.cpp.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "cli/session.hpp"

namespace agentctl::cli {

// What a parsed command does; returns the process exit code. Set by the
// subcommand's parse callback and run once parsing has finished.
using Action = std::function<int()>;

struct CommandEnv {
    Session& session;
    Action& action;
};

struct CommandEntry {
    std::string_view name;
    void (*add)(CLI::App& app, CommandEnv& env);
};

[[nodiscard]] std::span<const CommandEntry> commands();

// Adds an "Examples:" footer to a subcommand's help.
void set_examples(CLI::App& command, std::initializer_list<std::string_view> lines);

// Sandbox names: a letter, then letters, digits and '-', at most 63; no trailing '-'.
// Throws agentctl::Error naming the bad name.
void validate_instance_name(const std::string& name);

}  // namespace agentctl::cli
