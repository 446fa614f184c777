// list (alias ls) and status.
#include <algorithm>

#include <fmt/format.h>

#include "cli/commands_list.hpp"
#include "cli/output.hpp"

namespace agentctl::cli {

void add_list(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("list", "List sandboxes");
    cmd->alias("ls");
    auto quiet = std::make_shared<bool>(false);
    cmd->add_flag("-q,--quiet", *quiet, "Print only the names, one per line");
    set_examples(*cmd, {"agentctl list", "agentctl ls --output json", "agentctl list -q | xargs agentctl stop"});
    cmd->callback([&env, quiet] {
        env.action = [&env, quiet] {
            env.session.gate("list");
            const auto instances = env.session.lifecycle().list();
            if (*quiet) {
                for (const auto& info : instances) env.session.out() << info.name << "\n";
                return 0;
            }
            if (env.session.json()) {
                auto array = nlohmann::json::array();
                for (const auto& info : instances) array.push_back(instance_json(info));
                env.session.out() << array.dump(2) << "\n";
                return 0;
            }
            // Extra columns only when they say something: LOCATION when a sandbox
            // runs in a cluster, REMOTE when the sandboxes live on an Incus remote,
            // PROJECT when they live in an Incus project other than the default.
            auto extra_of = [](const InstanceInfo& info, std::string_view wanted) {
                for (const auto& [key, value] : info.extra) {
                    if (key == wanted) return value;
                }
                return std::string();
            };
            auto any_has = [&](std::string_view key) {
                return std::any_of(instances.begin(), instances.end(),
                                   [&](const auto& info) { return !extra_of(info, key).empty(); });
            };
            const bool located = std::any_of(instances.begin(), instances.end(),
                                             [](const InstanceInfo& info) { return !info.location.empty(); });
            const bool remote = any_has("remote");
            const bool project = any_has("project");
            std::vector<std::vector<std::string>> rows;
            for (const auto& info : instances) {
                rows.push_back({info.name, info.status, info.image, info.ips.empty() ? "-" : join(info.ips, ",")});
                if (located) rows.back().push_back(info.location.empty() ? "-" : info.location);
                if (remote) rows.back().push_back(extra_of(info, "remote"));
                if (project) rows.back().push_back(extra_of(info, "project"));
            }
            std::vector<std::string> headers{"NAME", "STATUS", "IMAGE", "IPS"};
            if (located) headers.emplace_back("LOCATION");
            if (remote) headers.emplace_back("REMOTE");
            if (project) headers.emplace_back("PROJECT");
            print_table(env.session.out(), headers, rows);
            return 0;
        };
    });
}

void add_status(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("status", "Show a sandbox: state, mounts, network policy, confinement");
    auto name = std::make_shared<std::string>();
    cmd->add_option("NAME", *name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    set_examples(*cmd, {"agentctl status demo", "agentctl status demo --output json"});
    cmd->callback([&env, name] {
        env.action = [&env, name] {
            validate_instance_name(*name);
            env.session.gate("status");
            const auto info = env.session.lifecycle().status(*name);
            if (env.session.json()) {
                env.session.out() << instance_json(info).dump(2) << "\n";
            } else {
                print_instance_status(env.session.out(), info);
            }
            return 0;
        };
    });
}

}  // namespace agentctl::cli
