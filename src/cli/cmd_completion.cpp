// completion bash|zsh|fish
#include "cli/commands_list.hpp"
#include "cli/completion.hpp"

namespace agentctl::cli {

void add_completion(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("completion", "Print a shell completion script");
    auto shell = std::make_shared<std::string>();
    cmd->add_option("SHELL", *shell, "bash, zsh or fish")->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
    set_examples(*cmd, {"agentctl completion bash > /etc/bash_completion.d/agentctl",
                        "agentctl completion zsh > \"${fpath[1]}/_agentctl\"",
                        "agentctl completion fish > ~/.config/fish/completions/agentctl.fish"});
    const CLI::App* root = &app;
    cmd->callback([&env, shell, root] {
        env.action = [&env, shell, root] {
            if (*shell == "bash") env.session.out() << bash_completion(*root);
            if (*shell == "zsh") env.session.out() << zsh_completion(*root);
            if (*shell == "fish") env.session.out() << fish_completion(*root);
            return 0;
        };
    });
}

}  // namespace agentctl::cli
