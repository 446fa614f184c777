// exec and shell: run inside a sandbox as its non-root user (or --root).
#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"

namespace agentctl::cli {

void add_exec(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("exec", "Run a command in a sandbox; exits with the command's exit code");
    auto name = std::make_shared<std::string>();
    auto request = std::make_shared<ExecRequest>();
    cmd->add_flag("--root", request->root, "Run as root instead of the sandbox user");
    cmd->add_flag("-t,--tty", request->tty, "Give the command the terminal (interactive)");
    cmd->add_option("NAME", *name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    cmd->add_option("COMMAND", request->argv, "The command and its arguments, after --")->required();
    set_examples(*cmd, {"agentctl exec demo -- whoami", "agentctl exec --root demo -- apt-get update",
                        "agentctl exec -t demo -- htop"});
    cmd->callback([&env, name, request] {
        env.action = [&env, name, request] {
            validate_instance_name(*name);
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
