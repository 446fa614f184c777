// help [COMMAND...] · version · man (hidden): what agentctl is and how to use it.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"
#include "cli/manpage.hpp"
#include "cli/output.hpp"
#include "cli/suggest.hpp"
#include "cli/version.hpp"

namespace agentctl::cli {

void add_help(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("help", "Show help for agentctl or for one of its commands");
    auto words = std::make_shared<std::vector<std::string>>();
    cmd->add_option("COMMAND", *words, "The command (and subcommand) to explain")->type_name(value_type::k_command);
    set_examples(*cmd, {"agentctl help", "agentctl help create", "agentctl help profile show"});
    const CLI::App* root = &app;
    cmd->callback([&env, words, root] {
        env.action = [&env, words, root] {
            const CLI::App* target = root;
            std::string prefix;  // the words before the target, as its usage line needs them
            for (const auto& word : *words) {
                const CLI::App* next = nullptr;
                std::vector<std::string> names;
                for (const auto* sub : target->get_subcommands({})) {
                    if (sub->get_group().empty()) continue;  // hidden
                    names.push_back(sub->get_name());
                    if (sub->check_name(word)) next = sub;
                }
                if (next == nullptr) {
                    auto match = closest_match(word, names);
                    throw Error(fmt::format("no command '{}'", word),
                                match ? fmt::format("did you mean '{}'?", *match)
                                      : std::string("run `agentctl help` for the list of commands"));
                }
                prefix = prefix.empty() ? root->get_name() : prefix + " " + target->get_name();
                target = next;
            }
            // The root's own help() would show the help of the selected subcommand (this one).
            env.session.out() << (target == root ? root->get_formatter()->make_help(root, root->get_name(),
                                                                                    CLI::AppFormatMode::Normal)
                                                 : target->help(prefix));
            return 0;
        };
    });
}

void add_version(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("version", "Show agentctl's version and commit, and the backend's version");
    set_examples(*cmd, {"agentctl version", "agentctl version --provider incus --output json"});
    cmd->callback([&env] {
        env.action = [&env] {
            auto& session = env.session;
            std::string provider;
            std::string backend;
            std::string why;
            try {
                provider = std::string(session.provider_entry().name);
                backend = session.provider().backend_version();
                if (backend.empty()) why = fmt::format("the {} provider cannot report it", provider);
            } catch (const std::exception& e) {
                why = e.what();  // unavailable, and why: never a failure of `version` itself
            }
            if (session.json()) {
                nlohmann::json doc{{"version", k_version},
                                   {"commit", k_commit},
                                   {"provider", provider.empty() ? nlohmann::json() : nlohmann::json(provider)},
                                   {"backend", backend.empty() ? nlohmann::json() : nlohmann::json(backend)}};
                if (backend.empty()) doc["backend_unavailable"] = why;
                session.out() << doc.dump(2) << "\n";
                return 0;
            }
            print_fields(session.out(), {{"Version", k_version},
                                         {"Commit", k_commit},
                                         {"Provider", provider.empty() ? "-" : provider},
                                         {"Backend", backend.empty() ? "unavailable (" + why + ")" : backend}});
            return 0;
        };
    });
}

void add_man(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("man", "Print the manual page (roff), generated from the command tree");
    cmd->group("");  // hidden: the build runs it to make agentctl.1
    const CLI::App* root = &app;
    cmd->callback([&env, root] {
        env.action = [&env, root] {
            env.session.out() << man_page(*root, k_version);
            return 0;
        };
    });
}

}  // namespace agentctl::cli
