// Rendering data for people (aligned tables, key: value lines) and for
// programs (--output json).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agentctl/provider.hpp"

namespace agentctl::cli {

void print_table(std::ostream& out, const std::vector<std::string>& headers,
                 const std::vector<std::vector<std::string>>& rows);

// `Key:  value` lines with the values aligned.
void print_fields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields);

[[nodiscard]] nlohmann::json instance_json(const InstanceInfo& info);
void print_instance_status(std::ostream& out, const InstanceInfo& info);

// A time in seconds since the epoch as RFC 3339 in UTC: "2026-11-30T12:00:00Z".
[[nodiscard]] std::string utc_time(std::int64_t seconds);

// The mount report start and status print: `  HOST -> GUEST (read-only|writable)` lines.
[[nodiscard]] std::vector<std::string> mount_lines(const std::vector<Mount>& mounts);

[[nodiscard]] std::string join(const std::vector<std::string>& items, std::string_view separator);

}  // namespace agentctl::cli
