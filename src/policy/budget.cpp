// Upload budgets: `HOST:PORT=SIZE`.
#include <algorithm>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"
#include "policy/profile.hpp"

namespace agentctl::policy {

std::string destination_text(std::string_view host, std::uint16_t port) {
    if (host.find(':') != std::string_view::npos) return fmt::format("[{}]:{}", host, port);
    return fmt::format("{}:{}", host, port);
}

UploadBudget parse_budget_entry(std::string_view entry) {
    auto bad = [entry](std::string_view what) {
        return Error(fmt::format("invalid budget \"{}\": {}", entry, what),
                     "write HOST:PORT=SIZE, e.g. api.github.com:443=50MiB");
    };
    const auto equals = entry.rfind('=');
    if (equals == std::string_view::npos) throw bad("it needs =SIZE");
    const auto size_text = entry.substr(equals + 1);
    const auto size = size_text == "none" ? std::optional<std::uint64_t>(0) : parse_size(size_text);
    if (!size) throw bad("the size must be above 0, such as 50MiB, 1GiB or 1000000 (or none to lift it)");
    AllowRule rule;
    try {
        rule = parse_allow_entry(entry.substr(0, equals), {});
    } catch (const Error& error) {
        throw bad(error.what());
    }
    if (rule.kind == HostKind::Wildcard) throw bad("a budget is for one host, not a wildcard");
    if (rule.ports.size() != 1) throw bad("it needs exactly one port (HOST:PORT)");
    // The egress proxy counts budgets; an address is admitted by the sandbox's
    // firewall without it. Lifting (`none`) stays possible.
    if (rule.kind == HostKind::Ip && *size != 0) {
        throw Error(fmt::format("invalid budget \"{}\": {} is an address, which the sandbox's firewall admits "
                                "without the egress proxy, so no budget could count it",
                                entry, rule.host),
                    "allow the destination by name and give the name a budget, e.g. api.example.com:443=50MiB");
    }
    return {rule.host, rule.ports.front(), *size};
}

UploadBudget parse_budget_limit(std::string_view entry) {
    auto budget = parse_budget_entry(entry);
    if (budget.bytes == 0) {
        throw Error(fmt::format("invalid budget \"{}\": none lifts a budget of a running sandbox only", entry),
                    "give a size here, or lift it later with `agentctl policy budget NAME HOST:PORT=none`");
    }
    return budget;
}

void tighten_budgets(std::vector<UploadBudget>& into, const std::vector<UploadBudget>& later) {
    for (const auto& budget : later) {
        auto same = std::find_if(into.begin(), into.end(),
                                 [&](const UploadBudget& b) { return b.host == budget.host && b.port == budget.port; });
        if (same == into.end()) {
            into.push_back(budget);
        } else if (budget.bytes < same->bytes) {
            same->bytes = budget.bytes;
        }
    }
}

}  // namespace agentctl::policy
