// exec and shell: run inside a sandbox as its non-root user (or --root).
#include <unistd.h>

#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"

namespace agentctl::cli {

namespace {

// `-e KEY=VALUE`, or `-e KEY` for this process's value of KEY (left out when
// it has none), as docker exec does.
void add_env(std::map<std::string, std::string>& env, const std::string& entry) {
    const auto eq = entry.find('=');
    const auto key = entry.substr(0, eq);
    if (key.empty()) throw Error(fmt::format("-e {}: the variable has no name", entry), "agentctl exec -e KEY=VALUE");
    if (eq != std::string::npos) {
        env[key] = entry.substr(eq + 1);
    } else if (const char* value = std::getenv(key.c_str())) {
        env[key] = value;
    }
}

}  // namespace

void add_exec(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("exec", "Run a command in a sandbox; exits with the command's exit code");
    auto name = std::make_shared<std::string>();
    auto request = std::make_shared<ExecRequest>();
    auto interactive = std::make_shared<bool>(false);
    auto tty = std::make_shared<bool>(false);
    auto vars = std::make_shared<std::vector<std::string>>();
    cmd->add_flag("--root", request->root, "Run as root instead of the sandbox user");
    cmd->add_flag("-i,--interactive", *interactive, "Pass stdin to the command even when it is a terminal");
    cmd->add_flag("-t,--tty", *tty, "Give the command a terminal (only when stdin is one)");
    cmd->add_option("-e,--env", *vars, "Set a variable: KEY=VALUE, or KEY for this shell's value (repeatable)")
        ->type_name("KEY[=VALUE]")
        ->allow_extra_args(false);  // one value per -e: NAME and `--` after it are not values
    cmd->add_option("-w,--cwd", request->cwd, "Working directory in the sandbox (absolute; default: the home)")
        ->type_name("DIR");
    cmd->add_option("NAME", *name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    cmd->add_option("COMMAND", request->argv, "The command and its arguments, after --")->required();
    cmd->footer(
        "\nStdin reaches the command when it is a pipe or a file (to its end), or with -i; a terminal\n"
        "without -i gives the command end-of-file. -t with stdin not a terminal runs without a tty.\n"
        "Exit status: the command's (128+N when signal N killed it); 127 command not found,\n"
        "126 not executable.\n\nExamples:\n"
        "  agentctl exec demo -- whoami\n"
        "  agentctl exec --root demo -- apt-get update\n"
        "  agentctl exec -t demo -- htop\n"
        "  echo hi | agentctl exec demo -- cat\n"
        "  agentctl exec -e DEBUG=1 -w /workspace demo -- make test");
    cmd->callback([&env, name, request, interactive, tty, vars] {
        env.action = [&env, name, request, interactive, tty, vars] {
            validate_instance_name(*name);
            for (const auto& entry : *vars) add_env(request->env, entry);
            if (!request->cwd.empty() && request->cwd.front() != '/') {
                throw Error(fmt::format("-w {}: the working directory must be an absolute path", request->cwd),
                            "agentctl exec -w /workspace " + *name + " -- pwd");
            }
            const bool stdin_terminal = ::isatty(STDIN_FILENO) == 1;
            request->tty = *tty && stdin_terminal;
            request->forward_stdin = *interactive || !stdin_terminal;
            env.session.gate("exec");
            return env.session.commands().exec(*name, *request);
        };
    });
}

void add_shell(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("shell", "Open an interactive shell in a sandbox");
    auto name = std::make_shared<std::string>();
    auto root = std::make_shared<bool>(false);
    cmd->add_option("NAME", *name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    cmd->add_flag("--root", *root, "Open a root shell instead of the sandbox user's");
    set_examples(*cmd, {"agentctl shell demo", "agentctl shell demo --root"});
    cmd->callback([&env, name, root] {
        env.action = [&env, name, root] {
            validate_instance_name(*name);
            env.session.gate("shell");
            return env.session.commands().shell(*name, *root);
        };
    });
}

void add_view(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("view", "Open the sandbox's graphical console");
    auto name = std::make_shared<std::string>();
    auto read_only = std::make_shared<bool>(false);
    cmd->add_option("NAME", *name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    cmd->add_flag("--read-only", *read_only, "Watch without sending input");
    set_examples(*cmd, {"agentctl view demo", "agentctl view demo --read-only"});
    cmd->callback([&env, name, read_only] {
        env.action = [&env, name, read_only] {
            validate_instance_name(*name);
            env.session.gate("view");
            env.session.console().view(*name, *read_only);
            return 0;
        };
    });
}

}  // namespace agentctl::cli
