// profile list|show|set|presets|packages
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"
#include "cli/sandbox_options.hpp"
#include "policy/profile_store.hpp"

namespace agentctl::cli {
void add_profile(CLI::App& app, CommandEnv& env) {
    auto* group = app.add_subcommand("profile", "Inspect profiles, presets and the package catalog");
    group->require_subcommand(1);

    auto* list = group->add_subcommand("list", "List every profile, in search order, with where it comes from");
    set_examples(*list, {"agentctl profile list", "agentctl profile list --output json"});
    list->callback([&env] {
        env.action = [&env] {
            auto profiles = policy::list_profiles(policy_environment(env.session));
            env.session.print_result([&] { return policy::profile_list_to_json(profiles); },
                                     [&] { return policy::render_profile_list(profiles); });
            return 0;
        };
    });

    auto name = std::make_shared<std::string>();
    auto* show = group->add_subcommand("show", "Show a profile as it applies, its allow file merged in");
    show->add_option("NAME", *name, "Profile name")->required()->type_name(value_type::k_profile);
    set_examples(*show, {"agentctl profile show default", "agentctl profile show strict --output json"});
    show->callback([&env, name] {
        env.action = [&env, name] {
            const auto profile = policy::load_profile(*name, policy_environment(env.session));
            env.session.print_result([&] { return policy::profile_to_json(profile); },
                                     [&] { return policy::profile_to_yaml(profile); });
            return 0;
        };
    });

    auto set_name = std::make_shared<std::string>();
    auto* set = group->add_subcommand("set", "Make a profile the default for create (writes defaultProfile)");
    set->add_option("NAME", *set_name, "Profile name")->required()->type_name(value_type::k_profile);
    set_examples(*set, {"agentctl profile set strict"});
    set->callback([&env, set_name] {
        env.action = [&env, set_name] {
            // Loading it first means a typo or an invalid profile never becomes the default.
            (void)policy::load_profile(*set_name, policy_environment(env.session));
            set_config_key(env.session, "defaultProfile", *set_name);
            if (!env.session.globals().preview) {
                env.session.reporter().notice(fmt::format("default profile is now {}", *set_name));
            }
            return 0;
        };
    });

    auto* presets = group->add_subcommand("presets", "Show what every allow preset expands to");
    set_examples(*presets, {"agentctl profile presets", "agentctl profile presets --output json"});
    presets->callback([&env] {
        env.action = [&env] {
            env.session.print_result(policy::presets_to_json, policy::render_presets_table);
            return 0;
        };
    });

    auto* packages = group->add_subcommand("packages", "Show the package catalog (neutral name to apt/dnf/apk)");
    set_examples(*packages, {"agentctl profile packages", "agentctl profile packages --output json"});
    packages->callback([&env] {
        env.action = [&env] {
            env.session.print_result(policy::packages_to_json, policy::render_packages_table);
            return 0;
        };
    });
}

}  // namespace agentctl::cli
