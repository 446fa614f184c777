// The decision log: one JSON object per line, appended, size-capped with one
// rotated file kept (`LOG.1`). Readers: print_network_log (egress_proxy.hpp).
#pragma once

#include <cstdint>
#include <functional>
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
    // Deferred (see defer_writes): the line is queued and reaches the file at
    // the next flush().
    void write(const nlohmann::json& entry);

    // Queues lines instead of writing each at once. `on_pending` is called when
    // the first line is queued after a flush (the proxy arms a short timer that
    // calls flush()); the queue is also flushed once it holds 64 KiB, and by
    // the destructor. An empty `on_pending` flushes and writes at once again.
    void defer_writes(std::function<void()> on_pending);
    // Writes every queued line (whole lines, one write(2) per run of lines
    // between rotations).
    void flush();
    [[nodiscard]] bool has_pending() const { return !m_pending.empty(); }

private:
    void rotate();
    void write_now(const char* data, std::size_t size);

    std::string m_path;
    std::uint64_t m_max_bytes;
    int m_fd = -1;
    std::uint64_t m_size = 0;
    bool m_reported_failure = false;
    bool m_deferred = false;
    std::function<void()> m_on_pending;
    std::string m_pending;  // whole lines, each ending in '\n'
};

// The current UTC time as RFC 3339 with milliseconds, e.g. 2026-01-02T03:04:05.678Z.
[[nodiscard]] std::string utc_timestamp();

// One log entry as a row of `agentctl logs NAME --network` (no trailing newline).
[[nodiscard]] std::string format_log_row(const nlohmann::json& entry);
// The header row printed above format_log_row rows.
[[nodiscard]] std::string log_table_header();

}  // namespace agentctl::egress_proxy
