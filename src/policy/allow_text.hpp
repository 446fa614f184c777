// Allow-file text, shared by load_allow_file() and the profile loader.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agentctl/policy.hpp"

namespace agentctl::policy {

// Parses allow-file text: one entry per line, `#` starts a comment, blank
// lines ignored, a leading UTF-8 byte-order mark skipped. Each rule's origin
// is "allow file LABEL:LINE". Throws agentctl::Error naming every bad line
// ("LABEL:LINE: invalid allow entry ..."), not only the first.
[[nodiscard]] std::vector<AllowRule> parse_allow_text(std::string_view text, const std::string& label);

}  // namespace agentctl::policy
