// The decision log: one JSON object per line, appended, size-capped with one
// rotated file kept (`LOG.1`). Readers: print_network_log (egress_proxy.hpp).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace agentctl::egress_proxy {

class AccessLog {
public:
    // Opens (creates, mode 0600) `path` for appending; an empty path writes to
    // stderr. Throws agentctl::Error naming the path when it cannot be opened.
    AccessLog(std::string path, std::uint64_t max_bytes);
    ~AccessLog();
    AccessLog(const AccessLog&) = delete;
    AccessLog& operator=(const AccessLog&) = delete;

    // Appends `entry` as one line. Before a write that would take the file past
    // max_bytes, renames it to `PATH.1` (replacing the older one) and starts a
    // new file. Never throws: a failed write is reported once on stderr.
    void write(const nlohmann::json& entry);

private:
    void rotate();

    std::string m_path;
    std::uint64_t m_max_bytes;
    int m_fd = -1;
    std::uint64_t m_size = 0;
    bool m_reported_failure = false;
};

// The current UTC time as RFC 3339 with milliseconds, e.g. 2026-01-02T03:04:05.678Z.
[[nodiscard]] std::string utc_timestamp();

// One log entry as a row of `agentctl logs NAME --network` (no trailing newline).
[[nodiscard]] std::string format_log_row(const nlohmann::json& entry);
// The header row printed above format_log_row rows.
[[nodiscard]] std::string log_table_header();

}  // namespace agentctl::egress_proxy
