#include "provider/common/mount_report.hpp"

#include <fmt/format.h>

namespace agentctl::provider::common {

std::string mount_report(const std::vector<Mount>& mounts) {
    if (mounts.empty()) return "no host directories are exposed to this sandbox.";
    std::string text = "host directories exposed to this sandbox:";
    for (const auto& m : mounts) {
        text += fmt::format("\n  {} -> {} ({})", m.host_path, m.guest_path, m.writable ? "writable" : "read-only");
    }
    return text;
}

void report_mounts(Reporter& reporter, const std::vector<Mount>& mounts) { reporter.notice(mount_report(mounts)); }

void recheck_recorded_mounts(const ProviderContext& context, const std::string& name,
                             const std::vector<std::string>& profiles, const std::vector<Mount>& recorded) {
    if (recorded.empty()) return;
    context.mount_checker.recheck(name, profiles, recorded);
}

}  // namespace agentctl::provider::common
