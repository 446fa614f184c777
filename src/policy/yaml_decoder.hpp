// Strict YAML decoding that collects every problem: each one names the file,
// line, column and field path (`spec.network.allow[2].ports[0]`).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "agentctl/error.hpp"

namespace agentctl::policy {

class YamlDecoder {
public:
    explicit YamlDecoder(std::string label) : m_label(std::move(label)) {}

    // Records a problem at `node` (its line and column), about `field`.
    void error(const YAML::Node& node, const std::string& field, std::string message);
    void error_at(const YAML::Mark& mark, const std::string& field, std::string message);

    // A mapping whose keys are all in `allowed` and none repeated; reports and
    // returns false otherwise (an unknown or repeated key is reported, the rest
    // is still decoded).
    bool expect_map(const YAML::Node& node, const std::string& field, std::initializer_list<std::string_view> allowed);
    // A sequence; reports and returns false otherwise.
    bool expect_sequence(const YAML::Node& node, const std::string& field);

    // Typed scalars. A plain (unquoted) `true`/`false` for booleans; a plain
    // decimal integer within [min, max] for integers; any scalar for strings.
    [[nodiscard]] std::optional<bool> boolean(const YAML::Node& node, const std::string& field);
    [[nodiscard]] std::optional<std::int64_t> integer(const YAML::Node& node, const std::string& field,
                                                      std::int64_t min, std::int64_t max);
    [[nodiscard]] std::optional<std::string> string(const YAML::Node& node, const std::string& field);
    [[nodiscard]] std::optional<std::vector<std::string>> strings(const YAML::Node& node, const std::string& field);

    [[nodiscard]] const std::string& label() const { return m_label; }
    [[nodiscard]] const std::vector<Diagnostic>& diagnostics() const { return m_diagnostics; }
    [[nodiscard]] bool ok() const { return m_diagnostics.empty(); }
    // 1-based line of `node`, 0 when unknown.
    [[nodiscard]] static int line_of(const YAML::Node& node);

    // Throws agentctl::Error listing every diagnostic when there is any.
    void throw_if_failed() const;

private:
    std::string m_label;
    std::vector<Diagnostic> m_diagnostics;
    std::size_t m_dropped = 0;
};

// Parses text into one YAML document; a syntax error becomes a diagnostic.
// Refuses input over 1 MiB and nesting deeper than 64 levels before parsing.
[[nodiscard]] std::optional<YAML::Node> parse_yaml_document(std::string_view text, YamlDecoder& decoder);

}  // namespace agentctl::policy
