// Errors a person reads, and the exit codes agentctl returns.
//
// Every failure that reaches the user is an agentctl::Error: a one-line message,
// an optional hint that says what to do next, and the exit code. main() catches it
// in one place and prints `agentctl: <message>` (and `hint: <hint>`) on stderr.
#pragma once

#include <stdexcept>
#include <string>

namespace agentctl {

// Exit codes, defined once. exec/shell pass the inner command's code through.
namespace exit_code {
inline constexpr int k_ok = 0;
inline constexpr int k_error = 1;              // bad input, backend failure
inline constexpr int k_not_available = 2;      // capability NotAvailable / UnderDevelopment
inline constexpr int k_manual_workaround = 3;  // ManualWorkaround without --force-partial
inline constexpr int k_policy_refused = 4;     // `policy check`: destination refused
inline constexpr int k_policy_unresolved = 5;  // `policy check`: allowed by the policy, but the name does not resolve
}  // namespace exit_code

class Error : public std::runtime_error {
public:
    explicit Error(std::string message, std::string hint = {}, int code = exit_code::k_error)
        : std::runtime_error(std::move(message)), m_hint(std::move(hint)), m_code(code) {}

    [[nodiscard]] const std::string& hint() const noexcept { return m_hint; }
    [[nodiscard]] int code() const noexcept { return m_code; }

private:
    std::string m_hint;
    int m_code;
};

// A problem found in a file the user wrote (profile, allow file, config).
// Rendered as `FILE:LINE:COL: field PATH: MESSAGE`; line/column are 1-based, 0 = unknown.
struct Diagnostic {
    std::string file;
    int line = 0;
    int column = 0;
    std::string field;  // e.g. spec.network.allow[2].ports[0]; empty when not about a field
    std::string message;

    [[nodiscard]] std::string render() const;
};

}  // namespace agentctl
