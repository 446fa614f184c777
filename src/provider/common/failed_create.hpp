// What a create that failed leaves, once for every provider.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "agentctl/provider.hpp"

namespace agentctl::provider::common {

// Kept when the user asked (--keep-on-failure: a notice says so and names the
// command that removes it), else removed by `remove`, with a notice before and
// after. A removal that fails is a warning naming `retry`, the command that
// finishes it. The create's own error is the caller's to rethrow.
void undo_failed_create(Reporter& reporter, const std::string& name, bool keep, const std::function<void()>& remove,
                        std::string_view retry);

}  // namespace agentctl::provider::common
