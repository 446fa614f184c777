// The mount report every provider prints on create, start and status: which
// host directories a sandbox sees, and how. Mounts are sticky across boots, so
// a bare start must always say what it re-exposes.
#pragma once

#include <string>
#include <vector>

#include "agentctl/provider.hpp"
#include "agentctl/sandbox.hpp"

namespace agentctl::provider::common {

// "host directories exposed to this sandbox:" and one "  HOST -> GUEST
// (read-only|writable)" line per mount, or "no host directories are exposed to
// this sandbox." — one notice on the reporter.
[[nodiscard]] std::string mount_report(const std::vector<Mount>& mounts);
void report_mounts(Reporter& reporter, const std::vector<Mount>& mounts);

// The start-time check of a sandbox's recorded mounts
// (ProviderContext::mount_checker), called by every provider right before
// anything boots with them. Throws agentctl::Error when one is refused.
void recheck_recorded_mounts(const ProviderContext& context, const std::string& name,
                             const std::vector<std::string>& profiles, const std::vector<Mount>& recorded);

}  // namespace agentctl::provider::common
