#include "egress_proxy/log_summary.hpp"

#include <algorithm>
#include <ostream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/policy.hpp"
#include "egress_proxy/connection_record.hpp"

namespace agentctl::egress_proxy {
namespace {

using Key = std::pair<std::string, std::uint16_t>;

void seen(DestinationSummary& row, const std::string& first, const std::string& last) {
    if (!first.empty() && (row.first_seen.empty() || first < row.first_seen)) row.first_seen = first;
    if (!last.empty() && last > row.last_seen) row.last_seen = last;
}

std::uint64_t count_of(const nlohmann::json& entry, const char* key) {
    auto it = entry.find(key);
    return it != entry.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

std::string string_of(const nlohmann::json& entry, const char* key) {
    auto it = entry.find(key);
    return it != entry.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string destination_of(const DestinationSummary& row) {
    return row.host.empty() ? "(no destination)" : policy::destination_text(row.host, row.port);
}

// 1536 -> "1.5 KiB": three significant figures at most.
std::string human_bytes(std::uint64_t bytes) {
    constexpr const char* k_units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) return fmt::format("{} B", bytes);
    double value = static_cast<double>(bytes);
    std::size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < std::size(k_units)) {
        value /= 1024.0;
        ++unit;
    }
    const int decimals = value < 10.0 ? 2 : value < 100.0 ? 1 : 0;
    return fmt::format("{:.{}f} {}", value, decimals, k_units[unit]);
}

// `2026-01-02T03:04:05.678Z` -> `2026-01-02 03:04:05`: the table's width, the second is enough.
std::string short_time(const std::string& time) {
    if (time.size() < 19) return time.empty() ? "-" : time;
    std::string out = time.substr(0, 19);
    out[10] = ' ';
    return out;
}

std::string reasons_text(const std::map<std::string, std::uint64_t>& reasons) {
    std::string out;
    for (const auto& [reason, count] : reasons) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", reason, count);
    return out;
}

}  // namespace

std::vector<DestinationSummary> summarise_log(const std::vector<std::string>& lines) {
    std::map<Key, DestinationSummary> rows;
    auto row_of = [&rows](const nlohmann::json& entry) -> DestinationSummary& {
        Key key{string_of(entry, record::k_host), static_cast<std::uint16_t>(count_of(entry, record::k_port))};
        auto& row = rows[key];
        row.host = key.first;
        row.port = key.second;
        return row;
    };
    for (const auto& line : lines) {
        const auto entry = nlohmann::json::parse(line, nullptr, false);
        if (!entry.is_object()) continue;
        const auto event = string_of(entry, "event");
        const auto time = string_of(entry, "time");
        if (event == record::k_event) {
            auto& row = row_of(entry);
            ++row.connections;
            row.bytes_up += count_of(entry, record::k_bytes_up);
            row.bytes_down += count_of(entry, record::k_bytes_down);
            const auto ended = string_of(entry, record::k_ended);
            ++row.endings[ended.empty() ? std::string(record::to_string(record::Ending::Closed)) : ended];
            const auto start = string_of(entry, record::k_start);
            seen(row, start.empty() ? time : start, time);
        } else if (event == "decision") {
            auto& row = row_of(entry);
            seen(row, time, time);
            if (string_of(entry, "decision") == "allow") continue;
            ++row.refusals;
            ++row.refusal_reasons[string_of(entry, "reason")];
        } else if (event == "refusals-suppressed") {
            auto& row = rows[Key{}];
            const auto count = count_of(entry, "suppressed");
            row.refusals += count;
            if (auto it = entry.find("by_reason"); it != entry.end() && it->is_object()) {
                for (const auto& [reason, n] : it->items()) {
                    if (n.is_number_unsigned()) row.refusal_reasons[reason] += n.get<std::uint64_t>();
                }
            }
            seen(row, string_of(entry, "from"), string_of(entry, "to"));
        }
    }
    std::vector<DestinationSummary> out;
    for (auto& [key, row] : rows) out.push_back(std::move(row));
    std::stable_sort(out.begin(), out.end(), [](const DestinationSummary& a, const DestinationSummary& b) {
        return std::make_tuple(b.bytes_up + b.bytes_down, b.refusals, b.connections) <
               std::make_tuple(a.bytes_up + a.bytes_down, a.refusals, a.connections);
    });
    return out;
}

void print_summary(const std::vector<DestinationSummary>& rows, bool json, std::ostream& out) {
    if (json) {
        for (const auto& row : rows) {
            nlohmann::json line{{"destination", destination_of(row)},
                                {"host", row.host.empty() ? nlohmann::json() : nlohmann::json(row.host)},
                                {"port", row.host.empty() ? nlohmann::json() : nlohmann::json(row.port)},
                                {"connections", row.connections},
                                {"bytes_up", row.bytes_up},
                                {"bytes_down", row.bytes_down},
                                {"first_seen", row.first_seen},
                                {"last_seen", row.last_seen},
                                {"ended", row.endings},
                                {"refusals", row.refusals},
                                {"refusal_reasons", row.refusal_reasons}};
            out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        }
        out.flush();
        return;
    }
    constexpr const char* k_row = "{:<34} {:>5} {:>10} {:>10}  {:<19}  {:<19}  {}\n";
    out << fmt::format(k_row, "DESTINATION", "CONNS", "UP", "DOWN", "FIRST SEEN (UTC)", "LAST SEEN (UTC)", "REFUSED");
    for (const auto& row : rows) {
        std::string refused = row.refusals == 0 ? "-" : std::to_string(row.refusals);
        if (row.refusals > 0) refused += " (" + reasons_text(row.refusal_reasons) + ")";
        out << fmt::format(k_row, destination_of(row), row.connections, human_bytes(row.bytes_up),
                           human_bytes(row.bytes_down), short_time(row.first_seen), short_time(row.last_seen), refused);
    }
    out.flush();
}

}  // namespace agentctl::egress_proxy
