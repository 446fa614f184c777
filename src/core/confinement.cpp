#include "agentctl/confinement.hpp"

#include <array>
#include <utility>

namespace agentctl {
namespace {

constexpr std::array<std::pair<ConfinementState, std::string_view>, 5> k_words{{
    {ConfinementState::Verified, "verified"},
    {ConfinementState::NotVerified, "not verified"},
    {ConfinementState::Failed, "FAILED"},
    {ConfinementState::Off, "off"},
    {ConfinementState::None, "none"},
}};

std::string_view word_of(ConfinementState state) {
    for (const auto& [known, word] : k_words) {
        if (known == state) return word;
    }
    return {};
}

}  // namespace

std::string to_string(const ConfinementStatus& status) {
    const auto word = word_of(status.state);
    if (word.empty()) return status.detail;
    std::string line(word);
    if (status.detail.empty()) return line;
    line += status.detail.starts_with('(') ? " " : ": ";
    return line + status.detail;
}

ConfinementStatus parse_confinement(std::string_view line) {
    for (const auto& [state, word] : k_words) {
        if (!line.starts_with(word)) continue;
        const auto rest = line.substr(word.size());
        if (rest.empty()) return {state, {}};
        if (rest.starts_with(" (")) return {state, std::string(rest.substr(1))};
        if (rest.starts_with(": ") && !rest.substr(2).starts_with('(') && rest.size() > 2) {
            return {state, std::string(rest.substr(2))};
        }
    }
    return {ConfinementState::Unknown, std::string(line)};
}

}  // namespace agentctl
