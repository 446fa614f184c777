#include "policy/yaml_decoder.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

#include <fmt/format.h>

namespace agentctl::policy {
namespace {

constexpr std::size_t k_max_diagnostics = 50;
constexpr std::size_t k_max_document_bytes = 1024 * 1024;
constexpr int k_max_nesting = 64;

std::string describe(const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Null: return "nothing";
        case YAML::NodeType::Sequence: return "a list";
        case YAML::NodeType::Map: return "a mapping";
        case YAML::NodeType::Scalar: return fmt::format("\"{}\"", node.Scalar().substr(0, 80));
        case YAML::NodeType::Undefined: break;
    }
    return "nothing";
}

bool is_plain(const YAML::Node& node) { return node.Tag() == "?" || node.Tag().empty(); }

// Nesting of flow collections and of indentation, counted without parsing, so
// that hostile input cannot drive the parser's recursion deep.
int rough_nesting(std::string_view text) {
    int depth = 0;
    int worst = 0;
    for (char c : text) {
        if (c == '[' || c == '{') worst = std::max(worst, ++depth);
        if ((c == ']' || c == '}') && depth > 0) --depth;
    }
    std::size_t line_start = 0;
    while (line_start < text.size()) {
        auto end = text.find('\n', line_start);
        if (end == std::string_view::npos) end = text.size();
        std::size_t indent = 0;
        while (line_start + indent < end && (text[line_start + indent] == ' ' || text[line_start + indent] == '-'))
            ++indent;
        worst = std::max(worst, static_cast<int>(indent / 2));
        line_start = end + 1;
    }
    return worst;
}

// Finds aliases: profiles never need them, and expanding them is how a small
// document becomes a huge one.
class AliasFinder : public YAML::EventHandler {
public:
    std::optional<YAML::Mark> first_alias;
    void OnDocumentStart(const YAML::Mark&) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
        if (!first_alias) first_alias = mark;
    }
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

}  // namespace

int YamlDecoder::line_of(const YAML::Node& node) {
    auto mark = node.Mark();
    return mark.line >= 0 ? mark.line + 1 : 0;
}

void YamlDecoder::error_at(const YAML::Mark& mark, const std::string& field, std::string message) {
    if (m_diagnostics.size() >= k_max_diagnostics) {
        ++m_dropped;
        return;
    }
    Diagnostic diagnostic;
    diagnostic.file = m_label;
    diagnostic.line = mark.line >= 0 ? mark.line + 1 : 0;
    diagnostic.column = mark.column >= 0 ? mark.column + 1 : 0;
    diagnostic.field = field;
    diagnostic.message = std::move(message);
    m_diagnostics.push_back(std::move(diagnostic));
}

void YamlDecoder::error(const YAML::Node& node, const std::string& field, std::string message) {
    error_at(node.Mark(), field, std::move(message));
}

bool YamlDecoder::expect_map(const YAML::Node& node, const std::string& field,
                             std::initializer_list<std::string_view> allowed) {
    if (!node.IsMap()) {
        error(node, field, fmt::format("must be a mapping, got {}", describe(node)));
        return false;
    }
    std::vector<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
        YAML::Node key = it->first;  // a copy: the iterator hands out a temporary
        if (!key.IsScalar()) {
            error(key, field, "keys must be plain names");
            continue;
        }
        const std::string& name = key.Scalar();
        std::string path = field.empty() ? name : field + "." + name;
        if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
            std::string known;
            for (auto k : allowed) known += (known.empty() ? "" : ", ") + std::string(k);
            error(key, path, fmt::format("unknown field (known fields here: {})", known));
        } else if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
            error(key, path, "appears twice");
        }
        seen.push_back(name);
    }
    return true;
}

bool YamlDecoder::expect_sequence(const YAML::Node& node, const std::string& field) {
    if (!node.IsSequence()) {
        error(node, field, fmt::format("must be a list, got {}", describe(node)));
        return false;
    }
    return true;
}

std::optional<bool> YamlDecoder::boolean(const YAML::Node& node, const std::string& field) {
    if (node.IsScalar() && is_plain(node)) {
        if (node.Scalar() == "true") return true;
        if (node.Scalar() == "false") return false;
    }
    error(node, field, fmt::format("must be true or false, got {}", describe(node)));
    return std::nullopt;
}

std::optional<std::int64_t> YamlDecoder::integer(const YAML::Node& node, const std::string& field, std::int64_t min,
                                                 std::int64_t max) {
    if (node.IsScalar() && is_plain(node)) {
        const std::string& text = node.Scalar();
        std::int64_t value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (!text.empty() && ec == std::errc() && end == text.data() + text.size()) {
            if (value < min || value > max) {
                error(node, field, fmt::format("must be between {} and {}, got {}", min, max, text));
                return std::nullopt;
            }
            return value;
        }
    }
    error(node, field, fmt::format("must be a whole number, got {}", describe(node)));
    return std::nullopt;
}

std::optional<std::string> YamlDecoder::string(const YAML::Node& node, const std::string& field) {
    if (node.IsScalar()) return node.Scalar();
    error(node, field, fmt::format("must be a string, got {}", describe(node)));
    return std::nullopt;
}

std::optional<std::vector<std::string>> YamlDecoder::strings(const YAML::Node& node, const std::string& field) {
    if (!expect_sequence(node, field)) return std::nullopt;
    std::vector<std::string> out;
    bool good = true;
    for (std::size_t i = 0; i < node.size(); ++i) {
        auto value = string(node[i], fmt::format("{}[{}]", field, i));
        if (value) {
            out.push_back(*value);
        } else {
            good = false;
        }
    }
    if (!good) return std::nullopt;
    return out;
}

void YamlDecoder::throw_if_failed() const {
    if (m_diagnostics.empty()) return;
    std::string message = fmt::format("{} is invalid ({} problem{}):", m_label, m_diagnostics.size() + m_dropped,
                                      m_diagnostics.size() + m_dropped == 1 ? "" : "s");
    for (const auto& diagnostic : m_diagnostics) message += "\n  " + diagnostic.render();
    if (m_dropped > 0) message += fmt::format("\n  ... and {} more", m_dropped);
    throw Error(message, "fix the fields named above; nothing was applied");
}

std::optional<YAML::Node> parse_yaml_document(std::string_view text, YamlDecoder& decoder) {
    YAML::Mark start;
    start.line = 0;
    start.column = 0;
    if (text.size() > k_max_document_bytes) {
        decoder.error_at(start, "", fmt::format("the file is larger than {} bytes", k_max_document_bytes));
        return std::nullopt;
    }
    if (rough_nesting(text) > k_max_nesting) {
        decoder.error_at(start, "", fmt::format("the document nests deeper than {} levels", k_max_nesting));
        return std::nullopt;
    }
    try {
        std::istringstream stream{std::string(text)};
        YAML::Parser parser(stream);
        AliasFinder finder;
        // yaml-cpp 0.7 never finishes on a stray top-level ',' (every call
        // yields another empty document without consuming it), so stop at two.
        int documents = 0;
        while (documents < 2 && parser.HandleNextDocument(finder)) ++documents;
        if (finder.first_alias) {
            decoder.error_at(*finder.first_alias, "",
                             "YAML aliases (*name) are not accepted in profiles; a value starting with '*' must be "
                             "quoted, e.g. \"*.example.com\"");
            return std::nullopt;
        }
        if (documents == 0) {
            decoder.error_at(start, "", "the file is empty; a profile starts with apiVersion: agentctl.dev/v1");
            return std::nullopt;
        }
        if (documents > 1) {
            decoder.error_at(
                start, "", "expected exactly one YAML document (found more, or a stray ',' outside a [ ] or { } list)");
            return std::nullopt;
        }
        return YAML::Load(std::string(text));
    } catch (const YAML::Exception& error) {
        std::string message = fmt::format("YAML syntax error: {}", error.msg);
        if (error.msg.find("anchor") != std::string::npos) {
            message += " (a value starting with '*' must be quoted, e.g. \"*.example.com\")";
        }
        decoder.error_at(error.mark, "", message);
        return std::nullopt;
    }
}

}  // namespace agentctl::policy
