// Grants that end on time: `policy add NAME HOST:PORT --for 1h`.
#include <algorithm>
#include <optional>
#include <charconv>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"

namespace agentctl::policy {

std::optional<std::int64_t> duration_seconds(std::string_view text) {
    if (text.empty()) return std::nullopt;
    constexpr std::int64_t k_most = 100LL * 365 * 86400;  // past any log's age and any grant
    std::int64_t total = 0;
    while (!text.empty()) {
        std::int64_t value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || end == text.data() || end == text.data() + text.size() || value < 0)
            return std::nullopt;
        std::int64_t unit = 0;
        switch (*end) {
            case 's': unit = 1; break;
            case 'm': unit = 60; break;
            case 'h': unit = 3600; break;
            case 'd': unit = 86400; break;
            default: return std::nullopt;
        }
        text.remove_prefix(static_cast<std::size_t>(end - text.data()) + 1);
        if (value > (k_most - total) / unit) return std::nullopt;
        total += value * unit;
    }
    return total;
}

std::int64_t parse_grant_duration(std::string_view text) {
    constexpr std::int64_t k_longest = 366LL * 86400;
    const auto seconds = duration_seconds(text);
    if (!seconds || *seconds == 0) {
        throw Error(fmt::format("invalid --for \"{}\": a duration such as 90s, 30m, 1h, 7d or 1h30m", text),
                    "agentctl policy add NAME api.example.com:443 --for 1h");
    }
    if (*seconds > k_longest) {
        throw Error(fmt::format("invalid --for \"{}\": at most 366d", text),
                    "a grant for good is `agentctl policy add NAME ENTRY` without --for");
    }
    return *seconds;
}

NetworkPolicy in_force_at(NetworkPolicy policy, std::int64_t now) {
    std::erase_if(policy.allow, [now](const AllowRule& rule) { return rule.expires != 0 && rule.expires <= now; });
    return policy;
}

std::int64_t next_expiry(const NetworkPolicy& policy, std::int64_t now) {
    std::int64_t next = 0;
    for (const auto& rule : policy.allow) {
        if (rule.expires > now && (next == 0 || rule.expires < next)) next = rule.expires;
    }
    return next;
}

}  // namespace agentctl::policy
