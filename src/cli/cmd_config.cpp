// config set KEY=VALUE · config get [KEY]
#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"
#include "cli/output.hpp"

namespace agentctl::cli {

void set_config_key(Session& session, const std::string& key, const std::string& value) {
    auto& config = session.config();
    if (!session.globals().preview) {
        config.set(key, value);
        return;
    }
    // The same checks as the real run; the file is shown, not written.
    const auto content = config.plan_set(key, value);
    session.out() << fmt::format("# {} would become:\n{}", config.paths().user_file.string(), content);
}

void add_config(CLI::App& app, CommandEnv& env) {
    auto* group = app.add_subcommand("config", "Read and change agentctl's configuration");
    group->require_subcommand(1);
    std::string keys;
    for (const auto& key : config_keys()) keys += fmt::format("\n  {:<18} {}", key.name, key.description);
    group->footer("\nKeys:" + keys);

    auto assignment = std::make_shared<std::string>();
    auto* set = group->add_subcommand("set", "Set a key in your configuration file");
    set->add_option("KEY=VALUE", *assignment, "The key and its new value")
        ->required()
        ->type_name(value_type::k_assignment);
    set_examples(*set, {"agentctl config set provider=incus", "agentctl config set defaultProfile=strict"});
    set->callback([&env, assignment] {
        env.action = [&env, assignment] {
            auto eq = assignment->find('=');
            if (eq == std::string::npos || eq == 0) {
                throw Error(fmt::format("expected KEY=VALUE, got '{}'", *assignment),
                            "for example: agentctl config set provider=incus");
            }
            set_config_key(env.session, assignment->substr(0, eq), assignment->substr(eq + 1));
            return 0;
        };
    });

    auto key = std::make_shared<std::string>();
    auto* get = group->add_subcommand("get", "Show one key, or every key with where its value comes from");
    get->add_option("KEY", *key, "The key to show")->type_name(value_type::k_config_key);
    set_examples(*get, {"agentctl config get", "agentctl config get provider", "agentctl config get --output json"});
    get->callback([&env, key] {
        env.action = [&env, key] {
            auto& config = env.session.config();
            if (!key->empty()) {
                if (config.find_key(*key) == nullptr) {
                    throw Error(fmt::format("unknown configuration key '{}'", *key),
                                "run `agentctl config get` to list the keys");
                }
                auto value = config.get(*key);
                if (env.session.json()) {
                    env.session.out() << nlohmann::json{{"key", *key},
                                                        {"value", value ? nlohmann::json(value->value) : nullptr},
                                                        {"source", value ? value->source : "unset"}}
                                             .dump(2)
                                      << "\n";
                } else if (value) {
                    env.session.out() << value->value << "\n";
                }
                return 0;
            }
            nlohmann::json all = nlohmann::json::object();
            std::vector<std::vector<std::string>> rows;
            for (const auto& spec : config.keys()) {
                auto value = config.get(spec.name);
                all[std::string(spec.name)] = {{"value", value ? nlohmann::json(value->value) : nullptr},
                                               {"source", value ? value->source : "unset"}};
                rows.push_back({std::string(spec.name), value ? value->value : "-", value ? value->source : "unset"});
            }
            if (env.session.json()) {
                env.session.out() << all.dump(2) << "\n";
            } else {
                print_table(env.session.out(), {"KEY", "VALUE", "SOURCE"}, rows);
            }
            return 0;
        };
    });
}

}  // namespace agentctl::cli
