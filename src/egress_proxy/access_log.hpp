// The decision log: one JSON object per line, appended, size-capped with one
// rotated file kept (`LOG.1`). Readers: print_network_log (egress_proxy.hpp).
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json_fwd.hpp>

namespace agentctl::egress_proxy {

// One log line built in place, for the proxy's per-connection lines: a JSON
// object whose fields appear in the order they are added, its strings escaped
// as nlohmann::json escapes them (invalid UTF-8 replaced). It costs one string
// instead of a JSON document per line; a reader sees the same object.
class LogLine {
public:
    // Starts the object with "time" (now, utc_timestamp) and "event".
    explicit LogLine(std::string_view event);

    LogLine& add(std::string_view key, std::string_view value);
    LogLine& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
    LogLine& add(std::string_view key, const std::string& value) { return add(key, std::string_view(value)); }
    LogLine& add(std::string_view key, bool value);
    LogLine& add(std::string_view key, double value);
    template <std::integral T>
    requires(!std::same_as<T, bool>) LogLine& add(std::string_view key, T value) {
        if constexpr (std::is_signed_v<T>) {
            return add_signed(key, value);
        } else {
            return add_unsigned(key, value);
        }
    }

    // The object's text, closed (no newline).
    [[nodiscard]] std::string text() const { return m_text + "}"; }

private:
    friend class AccessLog;
    LogLine& add_signed(std::string_view key, std::int64_t value);
    LogLine& add_unsigned(std::string_view key, std::uint64_t value);
    void key(std::string_view name);

    std::string m_text;
};

// Safe to use from several threads at once (the proxy's event loops): each
// line is queued and written whole, in the order the calls queued them. A
// thread that queues a line never waits for the file: the write(2) happens
// outside the queue's lock, so only the thread that flushes waits on the disk.
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
    void write(const LogLine& line);

    // Queues lines instead of writing each at once. `on_pending` is called when
    // the first line is queued after a flush (the proxy arms a short timer that
    // calls flush()), on the writing thread with the log locked: it must not
    // write to the log itself. The queue is also flushed once it holds 64 KiB,
    // and by the destructor. An empty `on_pending` flushes and writes at once again.
    void defer_writes(std::function<void()> on_pending);
    // Writes every queued line (whole lines, one write(2) per run of lines
    // between rotations).
    void flush();
    [[nodiscard]] bool has_pending() const;

private:
    // Writes m_writing to the file, rotating it as write() says; m_file_mutex held.
    void write_batch();
    void rotate();
    // Queues one line (`line` without its newline) and flushes as write() says.
    void append(std::string_view first, std::string_view last);
    void write_now(const char* data, std::size_t size);

    const std::string m_path;
    const std::uint64_t m_max_bytes;

    // The file: taken by the thread that flushes, before the queue's lock (and
    // never the other way round), for as long as its write(2) takes.
    std::mutex m_file_mutex;  // guards the members up to m_queue_mutex
    int m_fd = -1;
    std::uint64_t m_size = 0;
    bool m_reported_failure = false;
    std::string m_writing;  // the batch being written: whole lines, each ending in '\n'

    // The queue: taken for as long as it takes to append a line.
    mutable std::mutex m_queue_mutex;  // guards the members below
    bool m_deferred = false;
    std::function<void()> m_on_pending;
    std::string m_pending;  // whole lines, each ending in '\n'
};

// The current UTC time as RFC 3339 with milliseconds, e.g. 2026-01-02T03:04:05.678Z.
[[nodiscard]] std::string utc_timestamp();
// `when` in the same form.
[[nodiscard]] std::string utc_timestamp(std::chrono::system_clock::time_point when);

// One log entry as a row of `agentctl logs NAME --network` (no trailing newline).
[[nodiscard]] std::string format_log_row(const nlohmann::json& entry);
// The header row printed above format_log_row rows.
[[nodiscard]] std::string log_table_header();

}  // namespace agentctl::egress_proxy
