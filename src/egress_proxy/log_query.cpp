#include "egress_proxy/log_query.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"
#include "egress_proxy/access_log.hpp"

namespace agentctl::egress_proxy {
namespace {

using std::chrono::system_clock;

[[noreturn]] void bad_since(std::string_view text) {
    throw Error(fmt::format("invalid --since \"{}\": it is neither a duration nor a time", text),
                "write a duration such as 30s, 15m, 2h, 7d or 1h30m, or an RFC 3339 time such as "
                "2026-01-02T03:04:05Z");
}

// Reads `digits` decimal digits at `at`; nullopt unless they are all there.
std::optional<int> digits_at(std::string_view text, std::size_t at, std::size_t digits) {
    if (at + digits > text.size()) return std::nullopt;
    int value = 0;
    for (std::size_t i = at; i < at + digits; ++i) {
        if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
        value = value * 10 + (text[i] - '0');
    }
    return value;
}

std::optional<system_clock::time_point> parse_time(std::string_view text) {
    auto year = digits_at(text, 0, 4), month = digits_at(text, 5, 2), day = digits_at(text, 8, 2);
    if (!year || !month || !day || text[4] != '-' || text[7] != '-') return std::nullopt;
    if (*month < 1 || *month > 12 || *day < 1 || *day > 31) return std::nullopt;
    std::tm tm{};
    tm.tm_year = *year - 1900;
    tm.tm_mon = *month - 1;
    tm.tm_mday = *day;
    std::chrono::milliseconds fraction{0};
    std::chrono::minutes offset{0};
    if (text.size() > 10) {
        if (text[10] != 'T' && text[10] != 't' && text[10] != ' ') return std::nullopt;
        auto hour = digits_at(text, 11, 2), minute = digits_at(text, 14, 2), second = digits_at(text, 17, 2);
        if (!hour || !minute || !second || text[13] != ':' || text[16] != ':') return std::nullopt;
        if (*hour > 23 || *minute > 59 || *second > 60) return std::nullopt;
        tm.tm_hour = *hour;
        tm.tm_min = *minute;
        tm.tm_sec = *second;
        std::size_t at = 19;
        if (at < text.size() && text[at] == '.') {
            int scale = 100;
            for (++at; at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])); ++at, scale /= 10) {
                fraction += std::chrono::milliseconds((text[at] - '0') * scale);
            }
        }
        std::string_view zone = text.substr(std::min(at, text.size()));
        if (zone == "Z" || zone == "z") {
        } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
            auto hours = digits_at(zone, 1, 2), minutes = digits_at(zone, 4, 2);
            if (!hours || !minutes || *hours > 23 || *minutes > 59) return std::nullopt;
            offset = std::chrono::minutes(*hours * 60 + *minutes);
            if (zone[0] == '-') offset = -offset;
        } else {
            return std::nullopt;  // a time of day needs its zone: the log is UTC, the reader may not be
        }
    }
    const std::time_t seconds = ::timegm(&tm);
    if (tm.tm_mday != *day) return std::nullopt;  // 2026-02-31 normalised into March
    return system_clock::from_time_t(seconds) + fraction - offset;
}

}  // namespace

std::string parse_since(std::string_view text, system_clock::time_point now) {
    if (auto seconds = policy::duration_seconds(text)) {
        return utc_timestamp(now - std::chrono::duration_cast<system_clock::duration>(std::chrono::seconds(*seconds)));
    }
    if (auto time = parse_time(text)) return utc_timestamp(*time);
    bad_since(text);
}

std::string time_of(const std::string& line) {
    constexpr std::string_view key = "\"time\":\"";
    const auto at = line.find(key);
    if (at == std::string::npos) return {};
    const auto from = at + key.size();
    const auto to = line.find('"', from);
    return to == std::string::npos ? std::string() : line.substr(from, to - from);
}

void narrow_lines(std::vector<std::string>& lines, const std::string& since, std::optional<std::size_t> tail) {
    if (!since.empty()) {
        bool keep = false;
        std::erase_if(lines, [&](const std::string& line) {
            const auto time = time_of(line);
            if (!time.empty()) keep = time >= since;
            return !keep;
        });
    }
    if (tail && lines.size() > *tail) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(*tail));
}

}  // namespace agentctl::egress_proxy
