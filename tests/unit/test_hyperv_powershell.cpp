// PowerShell quoting for the hyperv provider's plans.
//
// The decoder below follows PowerShell's rule for single-quoted strings
// (about_Quoting_Rules: two consecutive single quotes stand for one) and its
// tokenizer's set of single-quote characters: ' U+2018 U+2019 U+201A U+201B
// (SpecialChars in PowerShell's engine/parser/CharTraits.cs).
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "agentctl/process.hpp"
#include "provider/hyperv/powershell.hpp"

using agentctl::provider::hyperv::powershell_argv;
using agentctl::provider::hyperv::preview_line;
using agentctl::provider::hyperv::ps_quote;

namespace {

// Length of the single-quote character at text[i] (1 or 3 bytes), or 0.
std::size_t quote_length(const std::string& text, std::size_t i) {
    if (text[i] == '\'') return 1;
    if (i + 2 < text.size() && static_cast<unsigned char>(text[i]) == 0xE2 &&
        static_cast<unsigned char>(text[i + 1]) == 0x80) {
        const auto third = static_cast<unsigned char>(text[i + 2]);
        if (third >= 0x98 && third <= 0x9B) return 3;
    }
    return 0;
}

// Reads one single-quoted literal that must span the whole of `literal`, the
// way PowerShell's tokenizer would; nullopt if the literal ends early or never.
std::optional<std::string> decode_single_quoted(const std::string& literal) {
    if (literal.empty() || literal.front() != '\'') return std::nullopt;
    std::string value;
    std::size_t i = 1;
    while (i < literal.size()) {
        const auto q = quote_length(literal, i);
        if (q == 0) {
            value += literal[i++];
            continue;
        }
        const auto next = i + q;
        const auto q2 = next < literal.size() ? quote_length(literal, next) : 0;
        if (q2 > 0) {  // a doubled quote: one literal quote character (the second)
            value += literal.substr(next, q2);
            i = next + q2;
            continue;
        }
        // The literal ends here; it must be the end of the input.
        return next == literal.size() ? std::optional<std::string>(value) : std::nullopt;
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("ps_quote makes a single-quoted literal", "[hyperv][powershell]") {
    CHECK(ps_quote("tbox") == "'tbox'");
    CHECK(ps_quote("") == "''");
    CHECK(ps_quote("it's") == "'it''s'");
    CHECK(ps_quote("C:\\Program Files\\My VMs") == "'C:\\Program Files\\My VMs'");
    // Nothing expands inside single quotes: $, backtick and double quotes stay as they are.
    CHECK(ps_quote("$env:USERPROFILE `whoami` \"x\" $(calc)") == "'$env:USERPROFILE `whoami` \"x\" $(calc)'");
}

TEST_CASE("ps_quote doubles the typographic single quotes PowerShell also ends a string on", "[hyperv][powershell]") {
    CHECK(ps_quote("a\u2018b") == "'a\u2018\u2018b'");
    CHECK(ps_quote("Bob\u2019s disk") == "'Bob\u2019\u2019s disk'");
    CHECK(ps_quote("x\u201Ay") == "'x\u201A\u201Ay'");
    CHECK(ps_quote("x\u201By") == "'x\u201B\u201By'");
    // Double quotation marks and dashes are not string delimiters here.
    CHECK(ps_quote("\u201Cq\u201D \u2014") == "'\u201Cq\u201D \u2014'");
    // A truncated UTF-8 sequence at the end is copied, not read past.
    CHECK(ps_quote(std::string("a\xE2\x80")) == std::string("'a\xE2\x80'"));
}

TEST_CASE("ps_quote round-trips through PowerShell's single-quote rule", "[hyperv][powershell]") {
    const std::vector<std::string> inputs{
        "",
        "plain",
        "'",
        "''",
        "a'b'c",
        "'; Remove-Item -Recurse C:\\ ; '",
        "\u2019; calc.exe; \u2018",
        "C:\\Users\\me\\My Project's \"src\"",
        "mixed '\u2018\u2019\u201A\u201B' end",
        "trailing quote'",
        "new\nline",
    };
    for (const auto& input : inputs) {
        INFO(input);
        const auto decoded = decode_single_quoted(ps_quote(input));
        REQUIRE(decoded.has_value());
        CHECK(*decoded == input);
    }
    // The decoder itself can fail: an undoubled quote ends the literal early.
    CHECK_FALSE(decode_single_quoted("'it's'").has_value());
    CHECK_FALSE(decode_single_quoted("'a\u2019b'").has_value());
}

TEST_CASE("powershell_argv and preview_line", "[hyperv][powershell]") {
    const std::vector<std::string> expected{"powershell.exe", "-NoProfile", "-NonInteractive", "-Command",
                                            "Start-VM -Name 'my vm'"};
    CHECK(powershell_argv("Start-VM -Name 'my vm'") == expected);
    // The preview line is POSIX-shell quoted around the PowerShell quoting.
    CHECK(preview_line("Start-VM -Name 'my vm'") ==
          "powershell.exe -NoProfile -NonInteractive -Command 'Start-VM -Name '\\''my vm'\\'''");
    CHECK(preview_line("Start-VM -Name " + ps_quote("it's")) ==
          "powershell.exe -NoProfile -NonInteractive -Command 'Start-VM -Name '\\''it'\\'''\\''s'\\'''");
    CHECK(preview_line("x") == agentctl::shell_join(powershell_argv("x")));
}

TEST_CASE("a preview line, run by a real POSIX shell, yields exactly powershell_argv", "[hyperv][powershell]") {
    auto runner = agentctl::make_real_process_runner();
    const std::vector<std::string> scripts{
        "New-VHD -Path " + ps_quote("C:\\VMs\\My Project's \"disk\".vhdx") + " -Differencing",
        "Start-VM -Name " + ps_quote("Bob\u2019s vm"),
        "$w = 1; foreach ($a in @(1,2)) { $w++ }; `echo` $(calc)",
    };
    for (const auto& script : scripts) {
        INFO(script);
        agentctl::ProcessRequest request;
        // `set --` re-reads the line as words; each word is then printed NUL-terminated.
        request.argv = {"sh", "-c", "set -- " + preview_line(script) + "; for a; do printf '%s\\0' \"$a\"; done"};
        request.timeout = std::chrono::seconds(10);
        const auto result = runner->run(request);
        REQUIRE(result.ok());
        std::vector<std::string> words;
        std::string word;
        for (char c : result.out) {
            if (c == '\0') {
                words.push_back(word);
                word.clear();
            } else {
                word += c;
            }
        }
        CHECK(words == powershell_argv(script));
    }
}
