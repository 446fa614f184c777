#include "provider/common/process_identity.hpp"

#include <arpa/inet.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/files.hpp"

namespace agentctl::provider::common {
namespace {

namespace fs = std::filesystem;

std::string read_small(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// The boot this process runs in: read once (it cannot change while agentctl runs).
const std::string& boot_id() {
    static const std::string id = [] {
        auto text = read_small("/proc/sys/kernel/random/boot_id");
        while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
        return text;
    }();
    return id;
}

struct ProcStat {
    std::string state;
    unsigned long long threads = 0;      // field 20
    unsigned long long start_ticks = 0;  // field 22
};

std::optional<ProcStat> proc_stat(int pid) {
    if (pid <= 0) return std::nullopt;
    const auto stat = read_small(fmt::format("/proc/{}/stat", pid));
    const auto close_paren = stat.rfind(')');
    if (close_paren == std::string::npos) return std::nullopt;
    std::istringstream fields(stat.substr(close_paren + 1));
    ProcStat parsed;
    fields >> parsed.state;  // field 3
    std::string field;
    for (int i = 4; i < 20 && fields >> field; ++i) {
    }
    fields >> parsed.threads >> field >> parsed.start_ticks;
    if (!fields || parsed.state.empty()) return std::nullopt;
    return parsed;
}

// Start time of a live, non-zombie process; nullopt otherwise.
std::optional<unsigned long long> start_ticks(int pid) {
    const auto stat = proc_stat(pid);
    if (!stat || stat->state == "Z" || stat->state == "X") return std::nullopt;
    return stat->start_ticks;
}

// True while the process that started at `ticks` holds anything: alive, or a
// zombie whose other threads are still exiting (and closing its sockets).
bool lingers(int pid, unsigned long long ticks) {
    const auto stat = proc_stat(pid);
    if (!stat || stat->start_ticks != ticks || stat->state == "X") return false;
    return stat->state != "Z" || stat->threads > 1;
}

std::optional<ProcessIdentity> identity_with(int pid, const std::string& exe_path) {
    const auto ticks = start_ticks(pid);
    if (!ticks) return std::nullopt;
    struct stat st {};
    if (::stat(exe_path.c_str(), &st) != 0) return std::nullopt;
    return ProcessIdentity{pid, *ticks, boot_id(), static_cast<std::uint64_t>(st.st_dev),
                           static_cast<std::uint64_t>(st.st_ino)};
}

}  // namespace

std::optional<ProcessIdentity> identity_of(int pid, const std::string& exe) { return identity_with(pid, exe); }

std::optional<ProcessIdentity> running_identity(int pid) {
    // stat() follows /proc/PID/exe to the file the process runs, also after
    // that file was replaced or removed on disk.
    return identity_with(pid, fmt::format("/proc/{}/exe", pid));
}

void write_identity(const std::string& path, const ProcessIdentity& identity) {
    const nlohmann::json record{{"pid", identity.pid},
                                {"start_ticks", identity.start_ticks},
                                {"boot_id", identity.boot_id},
                                {"exe_device", identity.exe_device},
                                {"exe_inode", identity.exe_inode}};
    core::write_file_atomic(path, record.dump() + "\n", 0600);
}

std::optional<ProcessIdentity> read_identity(const std::string& path) {
    try {
        const auto text = core::read_file_if_exists(path);
        if (!text) return std::nullopt;
        const auto record = nlohmann::json::parse(*text);
        ProcessIdentity identity;
        identity.pid = record.at("pid").get<int>();
        identity.start_ticks = record.at("start_ticks").get<unsigned long long>();
        identity.boot_id = record.at("boot_id").get<std::string>();
        identity.exe_device = record.at("exe_device").get<std::uint64_t>();
        identity.exe_inode = record.at("exe_inode").get<std::uint64_t>();
        if (identity.pid <= 0) return std::nullopt;
        return identity;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

namespace {

// Whether the recorded process is alive and still the one recorded.
bool still_recorded(const std::optional<ProcessIdentity>& recorded) {
    if (!recorded) return false;
    const auto now = running_identity(recorded->pid);
    return now && *now == *recorded;
}

}  // namespace

int verified_pid(const std::string& record) {
    const auto recorded = read_identity(record);
    return still_recorded(recorded) ? recorded->pid : 0;
}

bool terminate(int pid, std::chrono::milliseconds grace, const std::function<bool()>& still_there,
               std::chrono::milliseconds kill_wait) {
    const auto wait_until = [&](std::chrono::steady_clock::time_point deadline) {
        while (still_there() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return !still_there();
    };
    ::kill(pid, SIGTERM);
    if (wait_until(std::chrono::steady_clock::now() + grace)) return true;
    ::kill(pid, SIGKILL);
    // SIGKILL is not instant (a large address space takes a moment to tear
    // down): return only once it is gone, so callers never see it alive.
    return wait_until(std::chrono::steady_clock::now() + kill_wait);
}

std::optional<bool> stop_recorded(const std::string& record, std::chrono::milliseconds grace) {
    const auto recorded = read_identity(record);
    std::optional<bool> gone;
    if (still_recorded(recorded)) {
        gone = terminate(recorded->pid, grace, [&] { return lingers(recorded->pid, recorded->start_ticks); });
    }
    ::unlink(record.c_str());
    return gone;
}

std::optional<std::string> status_field(int pid, std::string_view name, const std::string& proc_root) {
    std::istringstream status(read_small(fmt::format("{}/{}/status", proc_root, pid)));
    const auto prefix = std::string(name) + ":";
    for (std::string line; std::getline(status, line);) {
        if (!line.starts_with(prefix)) continue;
        const auto value = line.find_first_not_of(" \t", prefix.size());
        return value == std::string::npos ? std::string() : line.substr(value);
    }
    return std::nullopt;
}

std::optional<uid_t> process_uid(int pid) {
    const auto uids = status_field(pid, "Uid");
    if (!uids) return std::nullopt;
    std::istringstream ids(*uids);
    unsigned long uid = 0;
    if (ids >> uid) return static_cast<uid_t>(uid);
    return std::nullopt;
}

std::string user_text(uid_t uid) {
    if (const passwd* pw = ::getpwuid(uid); pw != nullptr) return pw->pw_name;
    return fmt::format("uid {}", uid);
}

int tcp_listener_pid(const std::string& address, std::uint16_t port) {
    in_addr addr{};
    if (::inet_pton(AF_INET, address.c_str(), &addr) != 1) return 0;
    // /proc/net/tcp prints the address as the hex of its in-memory 32-bit value.
    const auto local = fmt::format("{:08X}:{:04X}", addr.s_addr, port);
    std::istringstream table(read_small("/proc/net/tcp"));
    std::string line;
    std::string inode;
    std::getline(table, line);  // the header
    while (inode.empty() && std::getline(table, line)) {
        std::istringstream fields(line);
        std::string slot, local_address, remote, state, queues, timer, retransmits, uid, timeout, socket_inode;
        fields >> slot >> local_address >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
            socket_inode;
        if (local_address == local && state == "0A") inode = socket_inode;
    }
    if (inode.empty()) return 0;
    const auto target = "socket:[" + inode + "]";
    std::error_code ec;
    for (const auto& process : fs::directory_iterator("/proc", ec)) {
        const auto name = process.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::error_code fd_ec;
        for (const auto& fd : fs::directory_iterator(process.path() / "fd", fd_ec)) {
            std::error_code link_ec;
            if (fs::read_symlink(fd.path(), link_ec).string() == target) return std::stoi(name);
        }
    }
    return 0;
}

}  // namespace agentctl::provider::common
