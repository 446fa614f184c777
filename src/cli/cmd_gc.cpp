// gc: removes what agentctl made whose sandbox is gone.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"
#include "cli/output.hpp"

namespace agentctl::cli {

void add_gc(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand(
        "gc",
        "Remove what agentctl made for sandboxes that are gone (bridges, ACLs, firewall tables, processes, state)");
    set_examples(*cmd, {"agentctl --preview gc", "agentctl gc", "agentctl gc --output json"});
    cmd->callback([&env] {
        env.action = [&env] {
            auto& session = env.session;
            session.gate("gc");
            const auto found = session.collector().collect();
            const bool preview = session.globals().preview;
            const auto result = [&](const Leftover& piece) {
                if (preview) return std::string("would remove");
                return piece.removed ? std::string("removed") : "left: " + piece.problem;
            };
            session.print_result(
                [&] {
                    auto array = nlohmann::json::array();
                    for (const auto& piece : found) {
                        nlohmann::json entry{{"kind", piece.kind}, {"name", piece.name}, {"sandbox", piece.sandbox}};
                        if (!preview) entry["removed"] = piece.removed;
                        if (!piece.problem.empty()) entry["problem"] = piece.problem;
                        array.push_back(std::move(entry));
                    }
                    return array;
                },
                [&] {
                    std::vector<std::vector<std::string>> rows;
                    for (const auto& piece : found) {
                        rows.push_back(
                            {piece.kind, piece.name, piece.sandbox.empty() ? "-" : piece.sandbox, result(piece)});
                    }
                    std::ostringstream text;
                    if (!rows.empty()) print_table(text, {"KIND", "NAME", "SANDBOX", "RESULT"}, rows);
                    return text.str();
                });
            std::size_t left = 0;
            for (const auto& piece : found) left += (!preview && !piece.removed) ? 1 : 0;
            if (found.empty()) session.reporter().notice("nothing left behind");
            if (left == 0) return exit_code::k_ok;
            session.reporter().warning(
                fmt::format("{} of {} leftovers could not be removed (see RESULT); run agentctl gc again once the "
                            "cause is fixed",
                            left, found.size()));
            return exit_code::k_error;
        };
    });
}

}  // namespace agentctl::cli
