#include "cli/suggest.hpp"

#include <algorithm>
#include <numeric>

namespace agentctl::cli {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), std::size_t{0});
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::optional<std::string> closest_match(std::string_view typed, const std::vector<std::string>& candidates) {
    if (typed.empty()) return std::nullopt;
    std::vector<std::string> prefixed;
    for (const auto& c : candidates) {
        if (c.size() > typed.size() && c.compare(0, typed.size(), typed) == 0) prefixed.push_back(c);
    }
    if (prefixed.size() == 1) return prefixed.front();

    std::optional<std::string> best;
    std::size_t best_distance = 3;
    for (const auto& c : candidates) {
        const auto d = edit_distance(typed, c);
        if (d < best_distance) {
            best_distance = d;
            best = c;
        }
    }
    return best;
}

}  // namespace agentctl::cli
