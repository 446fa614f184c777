// capabilities [--provider P]: the capability matrix, as a table or JSON.
#include <fmt/format.h>

#include "cli/commands_list.hpp"
#include "cli/output.hpp"

namespace agentctl::cli {

void add_capabilities(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("capabilities", "Show what each provider supports on this host");
    set_examples(*cmd, {"agentctl capabilities", "agentctl capabilities --provider lima",
                        "agentctl capabilities --output json"});
    cmd->callback([&env] {
        env.action = [&env] {
            auto& session = env.session;
            std::vector<const ProviderEntry*> chosen;
            if (session.globals().provider.empty()) {
                for (const auto& entry : providers()) chosen.push_back(&entry);
            } else {
                chosen.push_back(&session.provider_entry());
            }
            if (session.json()) {
                nlohmann::json doc = nlohmann::json::object();
                for (const auto* entry : chosen) {
                    nlohmann::json features = nlohmann::json::object();
                    const auto matrix = entry->capabilities(session.platform());
                    for (auto feature : k_features) {
                        const auto cap = matrix.get(feature);
                        features[std::string(feature)] = {{"status", std::string(to_string(cap.status))},
                                                          {"message", cap.message}};
                    }
                    doc[std::string(entry->name)] = {{"description", std::string(entry->description)},
                                                     {"features", features}};
                }
                session.out() << doc.dump(2) << "\n";
                return 0;
            }
            for (const auto* entry : chosen) {
                if (entry != chosen.front()) session.out() << "\n";
                session.out() << fmt::format("{} — {}\n", entry->name, entry->description);
                const auto matrix = entry->capabilities(session.platform());
                std::vector<std::vector<std::string>> rows;
                for (auto feature : k_features) {
                    const auto cap = matrix.get(feature);
                    rows.push_back({std::string(feature), std::string(to_string(cap.status)), cap.message});
                }
                print_table(session.out(), {"FEATURE", "STATUS", "DETAIL"}, rows);
            }
            return 0;
        };
    });
}

}  // namespace agentctl::cli
