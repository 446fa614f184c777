#include "egress_proxy/access_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "egress_proxy/connection_record.hpp"

namespace agentctl::egress_proxy {
namespace {

int open_append(const std::string& path) {
    return ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}

std::string text_field(const nlohmann::json& entry, const char* key) {
    auto it = entry.find(key);
    if (it == entry.end() || it->is_null()) return {};
    if (it->is_string()) return it->get<std::string>();
    return it->dump();
}

}  // namespace

AccessLog::AccessLog(std::string path, std::uint64_t max_bytes) : m_path(std::move(path)), m_max_bytes(max_bytes) {
    if (m_path.empty()) return;
    m_fd = open_append(m_path);
    if (m_fd < 0) {
        throw Error("cannot open the egress proxy log " + m_path + ": " + std::strerror(errno),
                    "check that its directory exists and is writable");
    }
    struct stat st {};
    if (::fstat(m_fd, &st) == 0) m_size = static_cast<std::uint64_t>(st.st_size);
}

AccessLog::~AccessLog() {
    flush();
    if (m_fd >= 0) ::close(m_fd);
}

void AccessLog::defer_writes(std::function<void()> on_pending) {
    bool deferred = false;
    {
        std::lock_guard lock(m_queue_mutex);
        m_deferred = deferred = static_cast<bool>(on_pending);
        m_on_pending = std::move(on_pending);
    }
    if (!deferred) flush();
}

bool AccessLog::has_pending() const {
    std::lock_guard lock(m_queue_mutex);
    return !m_pending.empty();
}

void AccessLog::rotate() {
    std::string old = m_path + ".1";
    ::rename(m_path.c_str(), old.c_str());
    int fd = open_append(m_path);
    if (fd < 0) return;  // keep writing to the renamed file rather than losing lines
    ::close(m_fd);
    m_fd = fd;
    m_size = 0;
}

// ---------------------------------------------------------------- LogLine

LogLine::LogLine(std::string_view event) {
    m_text.reserve(320);
    m_text = "{\"time\":\"";
    m_text += utc_timestamp();
    m_text += '"';
    add("event", event);
}

void LogLine::key(std::string_view name) {
    m_text += ",\"";
    m_text += name;  // keys are the proxy's own literals: nothing to escape
    m_text += "\":";
}

LogLine& LogLine::add(std::string_view name, std::string_view value) {
    key(name);
    const bool plain = std::all_of(value.begin(), value.end(), [](char c) {
        return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f && c != '"' && c != '\\';
    });
    if (plain) {
        m_text += '"';
        m_text += value;
        m_text += '"';
    } else {
        // The rare string that needs escaping takes nlohmann::json's rules.
        m_text += nlohmann::json(std::string(value)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    return *this;
}

LogLine& LogLine::add(std::string_view name, bool value) {
    key(name);
    m_text += value ? "true" : "false";
    return *this;
}

LogLine& LogLine::add(std::string_view name, double value) {
    key(name);
    m_text += nlohmann::json(value).dump();  // the shortest text that reads back the same double
    return *this;
}

LogLine& LogLine::add_signed(std::string_view name, std::int64_t value) {
    key(name);
    fmt::format_to(std::back_inserter(m_text), "{}", value);
    return *this;
}

LogLine& LogLine::add_unsigned(std::string_view name, std::uint64_t value) {
    key(name);
    fmt::format_to(std::back_inserter(m_text), "{}", value);
    return *this;
}

// ---------------------------------------------------------------- AccessLog

void AccessLog::write(const nlohmann::json& entry) {
    const std::string text = entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    append(text, {});
}

void AccessLog::write(const LogLine& line) { append(line.m_text, "}"); }

void AccessLog::append(std::string_view first, std::string_view last) {
    bool flush_now = false;
    {
        std::lock_guard lock(m_queue_mutex);
        bool was_empty = m_pending.empty();
        m_pending += first;
        m_pending += last;
        m_pending += '\n';
        if (!m_deferred || m_pending.size() >= 64 * 1024) {
            flush_now = true;
        } else if (was_empty && m_on_pending) {
            m_on_pending();
        }
    }
    if (flush_now) flush();
}

void AccessLog::flush() {
    // The file first, then the queue: batches reach the file in the order they
    // were queued, and queueing goes on while this one is written.
    std::lock_guard file(m_file_mutex);
    {
        std::lock_guard lock(m_queue_mutex);
        m_writing.swap(m_pending);
    }
    write_batch();
    m_writing.clear();  // keeps its capacity for the next batch
}

void AccessLog::write_batch() {
    std::size_t start = 0;
    while (start < m_writing.size()) {
        // The longest run of whole lines that keeps the file under its cap (at least one line).
        std::size_t end = start;
        while (end < m_writing.size()) {
            std::size_t next = m_writing.find('\n', end) + 1;
            if (end > start && m_fd >= 0 && m_size + (next - start) > m_max_bytes) break;
            end = next;
        }
        if (m_fd >= 0 && m_size > 0 && m_size + (end - start) > m_max_bytes) rotate();
        write_now(m_writing.data() + start, end - start);
        start = end;
    }
}

void AccessLog::write_now(const char* data, std::size_t size) {
    int fd = m_fd >= 0 ? m_fd : STDERR_FILENO;
    // O_APPEND: one write(2) per run of whole lines keeps lines whole for concurrent readers.
    ssize_t n = ::write(fd, data, size);
    if (n < 0 || static_cast<std::size_t>(n) != size) {
        if (!m_reported_failure) {
            std::fprintf(stderr, "agentctl: egress proxy: cannot write the log %s: %s\n", m_path.c_str(),
                         std::strerror(errno));
            m_reported_failure = true;
        }
        return;
    }
    m_size += size;
}

std::string utc_timestamp() { return utc_timestamp(std::chrono::system_clock::now()); }

std::string utc_timestamp(std::chrono::system_clock::time_point now) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    auto seconds = static_cast<std::time_t>(ms / 1000);
    // The date and time of day change once a second: the proxy writes many
    // lines a second, so the formatted second is kept per thread.
    thread_local std::time_t cached_second = -1;
    thread_local char cached[32] = {};
    if (seconds != cached_second) {
        std::tm tm{};
        ::gmtime_r(&seconds, &tm);
        std::strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
        cached_second = seconds;
    }
    const auto millis = static_cast<int>(ms % 1000);
    std::string out(cached);
    out += '.';
    out += static_cast<char>('0' + millis / 100);
    out += static_cast<char>('0' + millis / 10 % 10);
    out += static_cast<char>('0' + millis % 10);
    out += 'Z';
    return out;
}

std::string log_table_header() {
    return fmt::format("{:<24} {:<22} {:<8} {:<34} {:<6} {}", "TIME", "CLIENT", "METHOD", "DESTINATION", "RESULT",
                       "RULE / REASON");
}

std::string format_log_row(const nlohmann::json& entry) {
    if (!entry.is_object()) return entry.dump();
    std::string event = text_field(entry, "event");
    std::string destination = text_field(entry, "host");
    if (entry.contains("port") && !destination.empty()) {
        if (destination.find(':') != std::string::npos) destination = "[" + destination + "]";
        destination += ":" + text_field(entry, "port");
    }
    if (event == record::k_event) {
        std::string ended = text_field(entry, record::k_ended);
        return fmt::format("{:<24} {:<22} {:<8} {:<34} {:<6} up {} B, down {} B, {} ms", text_field(entry, "time"),
                           text_field(entry, "client"), "", destination, ended.empty() ? "closed" : ended,
                           text_field(entry, record::k_bytes_up), text_field(entry, record::k_bytes_down),
                           text_field(entry, record::k_duration_ms));
    }
    if (event != "decision") {
        return fmt::format("{:<24} {:<22} {:<8} {:<34} {:<6} {}", text_field(entry, "time"), "", "", "", event,
                           text_field(entry, "message"));
    }
    std::string why;
    std::string rule = text_field(entry, "rule");
    if (!rule.empty()) {
        why = rule;
        std::string origin = text_field(entry, "origin");
        if (!origin.empty()) why += " (" + origin + ")";
    } else {
        why = text_field(entry, "reason");
    }
    std::string address = text_field(entry, "address");
    if (!address.empty()) why += " -> " + address;
    return fmt::format("{:<24} {:<22} {:<8} {:<34} {:<6} {}", text_field(entry, "time"), text_field(entry, "client"),
                       text_field(entry, "method"), destination, text_field(entry, "decision"), why);
}

}  // namespace agentctl::egress_proxy
