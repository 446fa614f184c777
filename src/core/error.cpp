#include "agentctl/error.hpp"

#include <fmt/format.h>

namespace agentctl {

std::string Diagnostic::render() const {
    std::string where = file;
    if (line > 0) {
        where += fmt::format(":{}", line);
        if (column > 0) where += fmt::format(":{}", column);
    }
    std::string text = where.empty() ? std::string() : where + ": ";
    if (!field.empty()) text += "field " + field + ": ";
    return text + message;
}

}  // namespace agentctl
