#include <algorithm>

#include "agentctl/process.hpp"

namespace agentctl {

std::string shell_quote(const std::string& word) {
    if (word.empty()) return "''";
    const bool plain = std::all_of(word.begin(), word.end(), [](unsigned char c) {
        return std::isalnum(c) || std::string_view("@%_+=:,./-").find(static_cast<char>(c)) != std::string_view::npos;
    });
    if (plain) return word;
    std::string quoted = "'";
    for (char c : word) {
        if (c == '\'') {
            quoted += "'\\''";
        } else {
            quoted += c;
        }
    }
    return quoted + "'";
}

std::string shell_join(const std::vector<std::string>& argv) {
    std::string line;
    for (const auto& word : argv) {
        if (!line.empty()) line += ' ';
        line += shell_quote(word);
    }
    return line;
}

}  // namespace agentctl
