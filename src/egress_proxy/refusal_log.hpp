// The proxy's refusals, kept apart from the rest of its decision log and
// rate-limited per sandbox, so that a sandbox flooding its proxy with requests
// it refuses cannot rotate away the record of what it did: the connections it
// was allowed (and the proxy's start, policy and close lines) stay in the
// decision log (PATH and PATH.1), the refusals go to PATH.refused (and
// PATH.refused.1), at most k_refusals_per_second of them in full per second.
// The rest of a second's refusals are counted, and summed up in one
// `refusals-suppressed` line (how many, by reason, from when to when) once
// that second is over. `agentctl logs --network` reads all four files, merged
// in time order (kept_log_files).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "egress_proxy/access_log.hpp"
#include "egress_proxy/egress_proxy.hpp"

namespace agentctl::egress_proxy {

inline constexpr std::size_t k_refusals_per_second = 50;

// The file the refusals of the decision log at `log_path` go to.
[[nodiscard]] std::string refusal_log_path(const std::string& log_path);

// Thread-safe (the proxy's event loops share it).
class RefusalLog {
public:
    using Clock = std::chrono::steady_clock;

    explicit RefusalLog(AccessLog& log, std::size_t per_second = k_refusals_per_second);
    ~RefusalLog();
    RefusalLog(const RefusalLog&) = delete;
    RefusalLog& operator=(const RefusalLog&) = delete;

    // Logs one refusal (with its machine reason), or counts it when this second
    // has had its share already.
    void write(const LogLine& line, std::string_view reason, Clock::time_point now = Clock::now());
    // Writes the summary of a second that is over (the proxy calls it every
    // second), or of the current one too with `final`.
    void tick(Clock::time_point now = Clock::now(), bool final = false);

private:
    void summarise_locked();

    std::mutex m_mutex;
    AccessLog& m_log;
    const std::size_t m_per_second;
    Clock::time_point m_window_start{};
    std::size_t m_in_window = 0;
    std::uint64_t m_suppressed = 0;
    std::map<std::string, std::uint64_t, std::less<>> m_by_reason;
    std::string m_first_suppressed;  // utc_timestamp() of the first one counted
    std::string m_last_suppressed;
};

}  // namespace agentctl::egress_proxy
