// Building PowerShell command lines for the hyperv provider.
//
// Every Hyper-V operation is a PowerShell script run as
//   powershell.exe -NoProfile -NonInteractive -Command <script>
// Values from the sandbox spec (names, paths, hosts) only ever enter a script
// through ps_quote(), which makes them a single-quoted literal: PowerShell
// expands nothing inside one ($, backtick and double quotes are plain text).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace agentctl::provider::hyperv {

// `text` as a PowerShell single-quoted string literal. Every character the
// PowerShell tokenizer treats as a single quote is doubled: the ASCII
// apostrophe and U+2018, U+2019, U+201A, U+201B (PowerShell's SpecialChars in
// engine/parser/CharTraits.cs), so a path containing a typographic quote
// cannot end the literal early.
// Quoting rules: https://learn.microsoft.com/powershell/module/microsoft.powershell.core/about/about_quoting_rules
[[nodiscard]] std::string ps_quote(std::string_view text);

// The argv that runs `script`: {"powershell.exe", "-NoProfile",
// "-NonInteractive", "-Command", script}. With -Command, powershell.exe exits
// 1 when the last statement failed and 0 otherwise.
// https://learn.microsoft.com/powershell/module/microsoft.powershell.core/about/about_powershell_exe
[[nodiscard]] std::vector<std::string> powershell_argv(const std::string& script);

// One preview line: powershell_argv(script) rendered by agentctl::shell_join.
[[nodiscard]] std::string preview_line(const std::string& script);

}  // namespace agentctl::provider::hyperv
