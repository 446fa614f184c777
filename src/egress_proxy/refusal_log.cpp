#include "egress_proxy/refusal_log.hpp"

#include <nlohmann/json.hpp>

namespace agentctl::egress_proxy {

std::string refusal_log_path(const std::string& log_path) { return log_path + ".refused"; }

std::vector<std::string> kept_log_files(const std::string& log_path) {
    const auto refused = refusal_log_path(log_path);
    return {log_path + ".1", log_path, refused + ".1", refused};
}

RefusalLog::RefusalLog(AccessLog& log, std::size_t per_second) : m_log(log), m_per_second(per_second) {}

RefusalLog::~RefusalLog() { tick(Clock::now(), true); }

void RefusalLog::write(const LogLine& line, std::string_view reason, Clock::time_point now) {
    std::lock_guard lock(m_mutex);
    if (now - m_window_start >= std::chrono::seconds(1)) {
        summarise_locked();
        m_window_start = now;
        m_in_window = 0;
    }
    if (m_in_window < m_per_second) {
        ++m_in_window;
        m_log.write(line);
        return;
    }
    const auto time = utc_timestamp();
    if (m_suppressed == 0) m_first_suppressed = time;
    m_last_suppressed = time;
    ++m_suppressed;
    if (auto it = m_by_reason.find(reason); it != m_by_reason.end()) {
        ++it->second;
    } else {
        m_by_reason.emplace(std::string(reason), 1);
    }
}

void RefusalLog::tick(Clock::time_point now, bool final) {
    std::lock_guard lock(m_mutex);
    if (final || now - m_window_start >= std::chrono::seconds(1)) summarise_locked();
}

void RefusalLog::summarise_locked() {
    if (m_suppressed == 0) return;
    nlohmann::json by_reason = nlohmann::json::object();
    std::string reasons;
    for (const auto& [reason, count] : m_by_reason) {
        by_reason[reason] = count;
        reasons += (reasons.empty() ? "" : ", ") + reason + ": " + std::to_string(count);
    }
    m_log.write({{"time", utc_timestamp()},
                 {"event", "refusals-suppressed"},
                 {"suppressed", m_suppressed},
                 {"by_reason", by_reason},
                 {"from", m_first_suppressed},
                 {"to", m_last_suppressed},
                 {"message", "refused " + std::to_string(m_suppressed) + " more request(s) between " +
                                 m_first_suppressed + " and " + m_last_suppressed + " (" + reasons + "), more than " +
                                 std::to_string(m_per_second) + " a second: counted, not logged one by one"}});
    m_suppressed = 0;
    m_by_reason.clear();
}

}  // namespace agentctl::egress_proxy
