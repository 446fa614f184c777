#include "egress_proxy/access_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"

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
    m_deferred = static_cast<bool>(on_pending);
    m_on_pending = std::move(on_pending);
    if (!m_deferred) flush();
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

void AccessLog::write(const nlohmann::json& entry) {
    bool was_empty = m_pending.empty();
    m_pending += entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    m_pending += '\n';
    if (!m_deferred || m_pending.size() >= 64 * 1024) {
        flush();
    } else if (was_empty && m_on_pending) {
        m_on_pending();
    }
}

void AccessLog::flush() {
    std::size_t start = 0;
    while (start < m_pending.size()) {
        // The longest run of whole lines that keeps the file under its cap (at least one line).
        std::size_t end = start;
        while (end < m_pending.size()) {
            std::size_t next = m_pending.find('\n', end) + 1;
            if (end > start && m_fd >= 0 && m_size + (next - start) > m_max_bytes) break;
            end = next;
        }
        if (m_fd >= 0 && m_size > 0 && m_size + (end - start) > m_max_bytes) rotate();
        write_now(m_pending.data() + start, end - start);
        start = end;
    }
    m_pending.clear();
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

std::string utc_timestamp() {
    auto now = std::chrono::system_clock::now();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    std::time_t seconds = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    ::gmtime_r(&seconds, &tm);
    char buffer[32];
    std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
    return fmt::format("{}.{:03}Z", buffer, ms % 1000);
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
    if (event == "close") {
        return fmt::format("{:<24} {:<22} {:<8} {:<34} {:<6} up {} B, down {} B, {} ms", text_field(entry, "time"),
                           text_field(entry, "client"), "", destination, "closed", text_field(entry, "bytes_up"),
                           text_field(entry, "bytes_down"), text_field(entry, "duration_ms"));
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
