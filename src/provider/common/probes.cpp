#include "provider/common/probes.hpp"

#include <sstream>

#include <fmt/format.h>

#include "core/utc_time.hpp"

namespace agentctl::provider::common {

std::string_view to_string(ProbeVerdict verdict) {
    switch (verdict) {
        case ProbeVerdict::Held: return "held";
        case ProbeVerdict::Escaped: return "escaped";
        case ProbeVerdict::Inconclusive: return "inconclusive";
        case ProbeVerdict::Skipped: return "skipped";
    }
    return "inconclusive";
}

std::vector<ProbeResult> parse_probe_lines(const std::string& output) {
    std::vector<ProbeResult> results;
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::istringstream fields(line);
        std::string tag, name, verdict;
        if (!(fields >> tag >> name >> verdict) || tag != "agentctl-probe") continue;
        ProbeResult result;
        result.name = name;
        result.verdict = verdict == "held"      ? ProbeVerdict::Held
                         : verdict == "escaped" ? ProbeVerdict::Escaped
                         : verdict == "skipped" ? ProbeVerdict::Skipped
                                                : ProbeVerdict::Inconclusive;
        std::getline(fields >> std::ws, result.detail);
        results.push_back(std::move(result));
    }
    return results;
}

BatterySummary summarise(const std::vector<ProbeResult>& results) {
    BatterySummary summary;
    for (const auto& r : results) {
        if (r.verdict == ProbeVerdict::Skipped) {
            summary.skipped.push_back(&r);
            continue;
        }
        ++summary.total;
        if (r.verdict == ProbeVerdict::Held) ++summary.held;
        if (r.verdict == ProbeVerdict::Escaped) summary.escaped.push_back(&r);
        if (r.verdict == ProbeVerdict::Inconclusive) summary.inconclusive.push_back(&r);
    }
    return summary;
}

ConfinementStatus confinement_line(const BatterySummary& summary, std::chrono::system_clock::time_point when,
                                   std::string_view source_note) {
    const auto stamp = core::utc_stamp(when);
    std::string skipped;
    for (const auto* r : summary.skipped) skipped += fmt::format("{}{}", skipped.empty() ? "" : ", ", r->name);
    if (!skipped.empty()) skipped = fmt::format(", {} skipped: {}", summary.skipped.size(), skipped);
    if (!source_note.empty()) skipped += fmt::format(", {}", source_note);
    if (summary.total > 0 && summary.held == summary.total) {
        return {ConfinementState::Verified,
                fmt::format("({}/{} probes{}, {})", summary.held, summary.total, skipped, stamp)};
    }
    std::string why;
    for (const auto* r : summary.escaped)
        why += fmt::format("{}{}: escaped, {}", why.empty() ? "" : "; ", r->name, r->detail);
    for (const auto* r : summary.inconclusive) {
        why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", r->name, r->detail);
    }
    if (summary.total == 0) why = "the probe battery printed no result";
    return {summary.escaped.empty() ? ConfinementState::NotVerified : ConfinementState::Failed,
            fmt::format("({}/{} probes{}, {}): {}", summary.held, summary.total, skipped, stamp, why)};
}

}  // namespace agentctl::provider::common
