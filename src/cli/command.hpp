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

// What an option's value is, set as its CLI11 type name (help shows it, e.g.
// `--profile PROFILE`). Shell completion offers values by this name, so the
// command tree stays the one description of what each argument takes.
namespace value_type {
inline constexpr const char* k_sandbox = "SANDBOX";       // an existing sandbox (asks the provider)
inline constexpr const char* k_profile = "PROFILE";       // a profile name
inline constexpr const char* k_agent = "AGENT";           // an agent of the catalog
inline constexpr const char* k_preset = "PRESET";         // an allow preset
inline constexpr const char* k_config_key = "KEY";        // a configuration key
inline constexpr const char* k_assignment = "KEY=VALUE";  // a configuration key and its value
inline constexpr const char* k_file = "FILE";             // a host file
inline constexpr const char* k_path = "PATH";             // a host path (file or directory)
inline constexpr const char* k_dir = "DIR";               // a host directory
inline constexpr const char* k_command = "COMMAND";       // an agentctl command
}  // namespace value_type

// Adds an "Examples:" footer to a subcommand's help.
void set_examples(CLI::App& command, std::initializer_list<std::string_view> lines);

// Sandbox names: a letter, then letters, digits and '-', at most 63; no trailing '-'.
// Throws agentctl::Error naming the bad name.
void validate_instance_name(const std::string& name);

}  // namespace agentctl::cli
