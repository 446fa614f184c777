// `agentctl logs NAME --network`: prints (and follows) the decision log, every
// file of it that is kept (refusal_log.hpp), merged in time order.
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "egress_proxy/access_log.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "egress_proxy/log_proposal.hpp"
#include "egress_proxy/log_query.hpp"
#include "egress_proxy/log_summary.hpp"
#include "egress_proxy/refusal_log.hpp"

namespace agentctl::egress_proxy {
namespace {

std::atomic<bool> g_stop_follow{false};

extern "C" void on_follow_signal(int) { g_stop_follow.store(true); }

// Restores SIGINT/SIGTERM handlers when following ends.
class FollowSignals {
public:
    FollowSignals() {
        g_stop_follow.store(false);
        struct sigaction action {};
        action.sa_handler = on_follow_signal;
        sigemptyset(&action.sa_mask);
        ::sigaction(SIGINT, &action, &m_old_int);
        ::sigaction(SIGTERM, &action, &m_old_term);
    }
    ~FollowSignals() {
        ::sigaction(SIGINT, &m_old_int, nullptr);
        ::sigaction(SIGTERM, &m_old_term, nullptr);
    }
    FollowSignals(const FollowSignals&) = delete;
    FollowSignals& operator=(const FollowSignals&) = delete;

private:
    struct sigaction m_old_int {};
    struct sigaction m_old_term {};
};

// Control characters become visible escapes, whatever the file holds (a
// line someone appended by hand, or a name carrying a terminal escape, which
// the JSON escapes but the table would print decoded): C0 controls and DEL as
// \u00XX, and the C1 controls (U+0080-U+009F, UTF-8 C2 80-C2 9F) too.
std::string escape_controls(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\u{:04x}", c);
        } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                   static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
            out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[++i]));
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

void print_line(const std::string& line, bool json, std::ostream& out) {
    if (line.empty()) return;
    if (json) {
        out << escape_controls(line) << '\n';
        return;
    }
    auto entry = nlohmann::json::parse(line, nullptr, false);
    out << escape_controls(entry.is_discarded() ? line : format_log_row(entry)) << '\n';
}

// One file of the log, read to its end: whole lines, a partial last one kept.
struct Reader {
    std::string path;
    std::ifstream in;
    ino_t inode = 0;
    std::string pending;

    // The whole lines that arrived since the last call.
    std::vector<std::string> lines() {
        std::vector<std::string> out;
        if (!in) return out;
        char buffer[8192];
        while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
            pending.append(buffer, static_cast<std::size_t>(in.gcount()));
            std::size_t start = 0;
            for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
                out.push_back(pending.substr(start, nl - start));
            }
            pending.erase(0, start);
        }
        in.clear();
        return out;
    }
};

ino_t inode_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// The lines of several files merged by time (each file's own order kept; a
// line without a time goes with the one before it).
std::vector<std::string> merge_by_time(std::vector<std::vector<std::string>> files) {
    std::vector<std::string> merged;
    std::vector<std::size_t> next(files.size(), 0);
    std::vector<std::string> last_time(files.size());
    for (;;) {
        std::size_t pick = files.size();
        std::string earliest;
        for (std::size_t f = 0; f < files.size(); ++f) {
            if (next[f] >= files[f].size()) continue;
            auto time = time_of(files[f][next[f]]);
            if (time.empty()) time = last_time[f];
            if (pick == files.size() || time < earliest) {
                pick = f;
                earliest = time;
            }
        }
        if (pick == files.size()) break;
        last_time[pick] = earliest;
        merged.push_back(std::move(files[pick][next[pick]++]));
    }
    return merged;
}

void print_lines(const std::vector<std::string>& lines, bool json, std::ostream& out) {
    for (const auto& line : lines) print_line(line, json, out);
    out.flush();
}

}  // namespace

int print_network_log(const std::string& log_path, const LogRequest& request, std::ostream& out) {
    std::vector<Reader> readers;
    for (const auto& path : kept_log_files(log_path)) {
        readers.push_back(Reader{path, std::ifstream(path, std::ios::binary), inode_of(path), {}});
    }
    std::vector<std::vector<std::string>> files;
    for (auto& reader : readers) {
        files.push_back(reader.lines());
        if (!request.follow && !reader.pending.empty()) files.back().push_back(reader.pending);
    }
    auto lines = merge_by_time(std::move(files));
    narrow_lines(lines, request.since, request.tail);
    if (request.proposal != LogRequest::Proposal::None) {
        const ProposalOptions options{
            request.sandbox,
            request.proposal == LogRequest::Proposal::Profile ? ProposalForm::Profile : ProposalForm::AllowFile,
            request.wildcards};
        print_proposal(summarise_log(lines), options, out);
        return 0;
    }
    if (request.summary) {
        std::ostringstream summary;
        print_summary(summarise_log(lines), request.json, summary);
        std::istringstream rows(summary.str());
        for (std::string row; std::getline(rows, row);) out << escape_controls(row) << '\n';
        out.flush();
        return 0;
    }
    if (!request.json) out << log_table_header() << '\n';
    print_lines(lines, request.json, out);
    if (!request.follow) return 0;
    // Following: the current files (the rotated ones no longer grow), each
    // across its rotation.
    std::vector<Reader> current;
    for (auto& reader : readers) {
        if (!reader.path.ends_with(".1")) current.push_back(std::move(reader));
    }
    FollowSignals signals;
    while (!g_stop_follow.load()) {
        std::vector<std::vector<std::string>> fresh;
        for (auto& reader : current) {
            auto arrived = reader.lines();
            const ino_t now = inode_of(reader.path);
            if (now != reader.inode && now != 0) {
                // Rotated (or created): finish the old file, then start on the new one.
                auto rest = reader.lines();
                arrived.insert(arrived.end(), rest.begin(), rest.end());
                reader.in = std::ifstream(reader.path, std::ios::binary);
                reader.inode = now;
                auto started = reader.lines();
                arrived.insert(arrived.end(), started.begin(), started.end());
            }
            fresh.push_back(std::move(arrived));
        }
        print_lines(merge_by_time(std::move(fresh)), request.json, out);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
}

}  // namespace agentctl::egress_proxy
