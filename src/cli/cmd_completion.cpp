// completion bash|zsh|fish · __complete sandboxes|profiles (hidden, used by the scripts)
#include "cli/commands_list.hpp"
#include "cli/completion.hpp"
#include "cli/sandbox_options.hpp"
#include "policy/profile_store.hpp"

namespace agentctl::cli {

void add_completion(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("completion", "Print a shell completion script");
    auto shell = std::make_shared<std::string>();
    cmd->add_option("SHELL", *shell, "bash, zsh or fish")->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
    set_examples(*cmd, {"agentctl completion bash > ~/.local/share/bash-completion/completions/agentctl",
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

    // What the scripts ask at TAB time. Quiet: no errors, no progress, exit 0,
    // so a missing provider or daemon only means nothing is offered.
    auto* values = app.add_subcommand("__complete", "Print completion candidates, one per line");
    values->group("");
    auto kind = std::make_shared<std::string>();
    values->add_option("KIND", *kind, "sandboxes or profiles")->required();
    values->callback([&env, kind] {
        env.action = [&env, kind] {
            try {
                if (*kind == "sandboxes") {
                    env.session.gate("list");
                    for (const auto& info : env.session.lifecycle().list()) env.session.out() << info.name << "\n";
                } else if (*kind == "profiles") {
                    for (const auto& profile : policy::list_profiles(policy_environment(env.session))) {
                        if (!profile.shadowed) env.session.out() << profile.name << "\n";
                    }
                }
            } catch (const std::exception&) {
                // Nothing to offer.
            }
            return 0;
        };
    });
}

}  // namespace agentctl::cli
