#include "provider/common/command_output.hpp"

namespace agentctl::provider::common {

std::string output_tail(std::string_view output, std::size_t max_bytes) {
    std::string text =
        output.size() > max_bytes ? "..." + std::string(output.substr(output.size() - max_bytes)) : std::string(output);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
}

}  // namespace agentctl::provider::common
