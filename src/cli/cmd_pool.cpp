// pool: the warm pool of sandboxes made ahead of time (provider.hpp, WarmPool).
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands_list.hpp"
#include "cli/output.hpp"
#include "cli/sandbox_options.hpp"

namespace agentctl::cli {
namespace {

int show_pool(Session& session) {
    auto& pool = session.warm_pool();
    const auto size = pool.pool_size();
    const auto entries = pool.pool_entries();
    std::size_t ready = 0;
    for (const auto& entry : entries) ready += entry.ready ? 1 : 0;
    session.print_result(
        [&] {
            auto array = nlohmann::json::array();
            for (const auto& entry : entries) {
                array.push_back({{"name", entry.name}, {"status", entry.status}, {"ready", entry.ready}});
            }
            return nlohmann::json{{"size", size}, {"ready", ready}, {"entries", array}};
        },
        [&] {
            std::ostringstream text;
            text << fmt::format("warm pool: {} of {} ready\n", ready, size);
            std::vector<std::vector<std::string>> rows;
            for (const auto& entry : entries) rows.push_back({entry.name, entry.status, entry.ready ? "yes" : "no"});
            if (!rows.empty()) print_table(text, {"NAME", "STATUS", "READY"}, rows);
            return text.str();
        });
    return exit_code::k_ok;
}

// What an entry is made as: what `agentctl create NAME --isolation container
// --mount-none` would make with this user's profiles (the provider gives it
// a policy that allows nothing until a create takes it).
SandboxSpec entry_spec(Session& session) {
    CreateOptions options;
    options.name = "pool-entry";
    options.isolation = "container";
    options.mount.none = true;
    return build_sandbox_spec(session, options, false);
}

}  // namespace

void add_pool(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("pool", "Show, fill or drain the warm pool that makes create take milliseconds");
    set_examples(
        *cmd, {"agentctl config set incus.pool.size=2", "agentctl pool fill", "agentctl pool", "agentctl pool drain"});
    auto* fill = cmd->add_subcommand("fill", "Make entries until the pool holds its size (incus.pool.size)");
    auto* drain = cmd->add_subcommand("drain", "Remove every entry of the pool");
    auto* show = cmd->add_subcommand("list", "Show the pool's entries (the default)");
    cmd->callback([&env, fill, drain, show] {
        env.action = [&env, fill, drain, show] {
            auto& session = env.session;
            session.gate("pool");
            if (fill->parsed()) {
                const auto made = session.warm_pool().pool_fill(entry_spec(session));
                session.reporter().notice(made == 0
                                              ? std::string("the pool was full")
                                              : fmt::format("made {} pool entr{}", made, made == 1 ? "y" : "ies"));
                return exit_code::k_ok;
            }
            if (drain->parsed()) {
                const auto removed = session.warm_pool().pool_drain();
                session.reporter().notice(fmt::format("removed {} pool entr{}", removed, removed == 1 ? "y" : "ies"));
                return exit_code::k_ok;
            }
            (void)show;
            return show_pool(session);
        };
    });
}

}  // namespace agentctl::cli
