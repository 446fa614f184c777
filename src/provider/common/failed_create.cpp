#include "provider/common/failed_create.hpp"

#include <exception>

#include <fmt/format.h>

namespace agentctl::provider::common {

void undo_failed_create(Reporter& reporter, const std::string& name, bool keep, const std::function<void()>& remove,
                        std::string_view retry) {
    if (keep) {
        reporter.notice(
            fmt::format("create failed; kept what was made for {} (--keep-on-failure): "
                        "`agentctl delete {} --force` removes it",
                        name, name));
        return;
    }
    reporter.notice(fmt::format("create failed; removing what was made for {}", name));
    try {
        remove();
        // Ends the last cleanup step as done: the error printed next is the create's.
        reporter.notice(fmt::format("removed what was made for {}", name));
    } catch (const std::exception& cleanup) {
        reporter.warning(fmt::format("cleanup of {} failed: {} (run {})", name, cleanup.what(), retry));
    }
}

}  // namespace agentctl::provider::common
