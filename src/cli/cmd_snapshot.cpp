// snapshot create|list|restore|delete NAME [SNAPSHOT]
#include <fmt/format.h>

#include "cli/commands_list.hpp"
#include "cli/output.hpp"

namespace agentctl::cli {
namespace {

struct SnapshotArgs {
    std::string name;
    std::string snapshot;
};

CLI::App* add_verb(CLI::App& parent, const std::string& verb, const std::string& description,
                   std::shared_ptr<SnapshotArgs> args, bool needs_snapshot) {
    auto* cmd = parent.add_subcommand(verb, description);
    cmd->add_option("NAME", args->name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    if (needs_snapshot) cmd->add_option("SNAPSHOT", args->snapshot, "Snapshot name")->required();
    return cmd;
}

}  // namespace

void add_snapshot(CLI::App& app, CommandEnv& env) {
    auto* group = app.add_subcommand("snapshot", "Create, list, restore and delete sandbox snapshots");
    group->require_subcommand(1);
    set_examples(*group, {"agentctl snapshot create demo before-upgrade", "agentctl snapshot list demo",
                          "agentctl snapshot restore demo before-upgrade"});
    auto args = std::make_shared<SnapshotArgs>();

    add_verb(*group, "create", "Take a snapshot", args, true)->callback([&env, args] {
        env.action = [&env, args] {
            validate_instance_name(args->name);
            env.session.gate("snapshot.create");
            env.session.lock_instance(args->name);
            env.session.snapshots().snapshot_create(args->name, args->snapshot);
            return 0;
        };
    });
    add_verb(*group, "list", "List snapshots", args, false)->callback([&env, args] {
        env.action = [&env, args] {
            validate_instance_name(args->name);
            env.session.gate("snapshot.list");
            const auto snapshots = env.session.snapshots().snapshot_list(args->name);
            if (env.session.json()) {
                auto array = nlohmann::json::array();
                for (const auto& s : snapshots) {
                    array.push_back({{"name", s.name}, {"created_at", s.created_at}, {"stateful", s.stateful}});
                }
                env.session.out() << array.dump(2) << "\n";
                return 0;
            }
            std::vector<std::vector<std::string>> rows;
            for (const auto& s : snapshots) rows.push_back({s.name, s.created_at, s.stateful ? "yes" : "no"});
            print_table(env.session.out(), {"NAME", "CREATED", "STATEFUL"}, rows);
            return 0;
        };
    });
    add_verb(*group, "restore", "Restore a snapshot", args, true)->callback([&env, args] {
        env.action = [&env, args] {
            validate_instance_name(args->name);
            env.session.gate("snapshot.restore");
            env.session.lock_instance(args->name);
            env.session.snapshots().snapshot_restore(args->name, args->snapshot);
            return 0;
        };
    });
    add_verb(*group, "delete", "Delete a snapshot", args, true)->callback([&env, args] {
        env.action = [&env, args] {
            validate_instance_name(args->name);
            env.session.gate("snapshot.delete");
            env.session.lock_instance(args->name);
            env.session.snapshots().snapshot_delete(args->name, args->snapshot);
            return 0;
        };
    });
}

}  // namespace agentctl::cli
