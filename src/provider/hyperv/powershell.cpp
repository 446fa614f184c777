#include "provider/hyperv/powershell.hpp"

#include "agentctl/process.hpp"

namespace agentctl::provider::hyperv {
namespace {

// The UTF-8 encodings of U+2018..U+201B: E2 80 98..9B.
constexpr unsigned char k_utf8_lead = 0xE2;
constexpr unsigned char k_utf8_second = 0x80;
constexpr unsigned char k_first_quote = 0x98;
constexpr unsigned char k_last_quote = 0x9B;

bool typographic_single_quote_at(std::string_view text, std::size_t i) {
    if (i + 2 >= text.size()) return false;
    const auto b0 = static_cast<unsigned char>(text[i]);
    const auto b1 = static_cast<unsigned char>(text[i + 1]);
    const auto b2 = static_cast<unsigned char>(text[i + 2]);
    return b0 == k_utf8_lead && b1 == k_utf8_second && b2 >= k_first_quote && b2 <= k_last_quote;
}

}  // namespace

std::string ps_quote(std::string_view text) {
    std::string quoted = "'";
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\'') {
            quoted += "''";
        } else if (typographic_single_quote_at(text, i)) {
            const auto mark = text.substr(i, 3);
            quoted += mark;
            quoted += mark;
            i += 2;
        } else {
            quoted += text[i];
        }
    }
    return quoted + "'";
}

std::vector<std::string> powershell_argv(const std::string& script) {
    return {"powershell.exe", "-NoProfile", "-NonInteractive", "-Command", script};
}

std::string preview_line(const std::string& script) { return shell_join(powershell_argv(script)); }

}  // namespace agentctl::provider::hyperv
