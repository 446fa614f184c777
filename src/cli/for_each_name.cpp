#include "cli/for_each_name.hpp"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agentctl/error.hpp"
#include "cli/command.hpp"
#include "cli/reporter.hpp"

namespace agentctl::cli {

std::vector<std::string> unique_names(const std::vector<std::string>& names) {
    std::vector<std::string> unique;
    for (const auto& name : names) {
        if (std::find(unique.begin(), unique.end(), name) == unique.end()) unique.push_back(name);
    }
    return unique;
}

int for_each_name(Session& session, const std::vector<std::string>& given, std::string_view done,
                  const std::function<void(const std::string&)>& act) {
    const auto names = unique_names(given);
    for (const auto& name : names) validate_instance_name(name);
    // Also ends the name's last step, so that a failure of the next name is
    // never shown as a failure of this one's step.
    auto report = [&](const std::string& name) {
        if (!session.globals().preview) session.reporter().notice(fmt::format("{} {}", done, name));
    };
    if (names.size() == 1) {
        act(names.front());
        report(names.front());
        return 0;
    }
    int status = 0;
    std::vector<std::string> failed;
    for (const auto& name : names) {
        try {
            act(name);
            report(name);
        } catch (const Error& e) {
            session.fail_step();
            std::cerr << fmt::format("agentctl: {}: {}\n", name, e.what());
            if (!e.hint().empty()) std::cerr << "hint: " << e.hint() << "\n";
            if (status == 0) status = e.code();
            failed.push_back(name);
        }
    }
    if (!failed.empty()) {
        std::cerr << fmt::format("agentctl: {} of {} failed: {}\n", failed.size(), names.size(),
                                 fmt::join(failed, " "));
    }
    return status;
}

}  // namespace agentctl::cli
