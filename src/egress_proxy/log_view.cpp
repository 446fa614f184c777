// `agentctl logs NAME --network`: prints (and follows) the decision log.
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <ostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "egress_proxy/access_log.hpp"
#include "egress_proxy/egress_proxy.hpp"

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

void print_line(const std::string& line, bool json, std::ostream& out) {
    if (line.empty()) return;
    if (json) {
        out << line << '\n';
        return;
    }
    auto entry = nlohmann::json::parse(line, nullptr, false);
    out << (entry.is_discarded() ? line : format_log_row(entry)) << '\n';
}

// Reads whole lines from `in`, keeping a partial last line in `pending`.
void drain(std::ifstream& in, std::string& pending, bool json, std::ostream& out) {
    char buffer[8192];
    while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
        pending.append(buffer, static_cast<std::size_t>(in.gcount()));
        std::size_t start = 0;
        for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
            print_line(pending.substr(start, nl - start), json, out);
        }
        pending.erase(0, start);
    }
    in.clear();
    out.flush();
}

ino_t inode_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

int print_network_log(const std::string& log_path, bool follow, bool json, std::ostream& out) {
    if (!json) out << log_table_header() << '\n';
    std::string pending;
    std::ifstream in(log_path, std::ios::binary);
    if (!follow) {
        if (in) drain(in, pending, json, out);
        print_line(pending, json, out);
        return 0;
    }
    FollowSignals signals;
    ino_t inode = in ? inode_of(log_path) : 0;
    while (!g_stop_follow.load()) {
        if (in) drain(in, pending, json, out);
        ino_t now = inode_of(log_path);
        if (now != inode && now != 0) {
            // Rotated (or created): finish the old file, then start on the new one.
            if (in) drain(in, pending, json, out);
            in = std::ifstream(log_path, std::ios::binary);
            inode = now;
            continue;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (in) drain(in, pending, json, out);
    return 0;
}

}  // namespace agentctl::egress_proxy
