#include "provider/incus/network/host_cgroup.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::provider::incus {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view k_parent = "agentctl";

bool unified(const std::string& root) {
    std::ifstream controllers(fs::path(root) / "cgroup.controllers");
    std::string line;
    std::getline(controllers, line);
    return line.find("memory") != std::string::npos && line.find("pids") != std::string::npos;
}

// Writes `value` to the control file; a limit the kernel refuses because the
// cgroup holds more than that (EBUSY) is noted in `kept`.
void write_value(const fs::path& file, std::uint64_t value, std::vector<std::string>& kept) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    const auto text = std::to_string(value);
    const bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const int error = errno;
    if (fd >= 0) ::close(fd);
    if (ok) return;
    if (error == EBUSY) {
        kept.push_back(
            fmt::format("{} stays as it was: the processes there still hold more than {} bytes (it is "
                        "set at their next start)",
                        file.string(), value));
        return;
    }
    throw Error(fmt::format("cannot write {} to {}: {}", value, file.string(), std::strerror(error)),
                "agentctl must run as root, with the memory and pids cgroup controllers mounted");
}

void enable_controllers(const fs::path& file) {
    std::ofstream out(file);
    out << "+memory +pids";
    out.flush();
    if (!out) {
        throw Error(
            fmt::format("cannot enable the memory and pids controllers in {}: {}", file.string(), std::strerror(errno)),
            "agentctl must run as root, with the memory and pids cgroup controllers mounted");
    }
}

fs::path make_dir(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        throw Error(fmt::format("cannot create cgroup {}: {}", dir.string(), ec.message()),
                    "agentctl must run as root, with the memory and pids cgroup controllers mounted");
    }
    return dir;
}

// Where the `agentctl/` cgroups are: one directory on v2, one per controller on v1.
std::vector<fs::path> parents_of(const std::string& root, bool v2) {
    if (v2) return {fs::path(root) / k_parent};
    return {fs::path(root) / "memory" / k_parent, fs::path(root) / "pids" / k_parent};
}

std::vector<std::string> dirs_of(const std::string& name, const std::string& root, bool v2) {
    std::vector<std::string> dirs;
    for (const auto& parent : parents_of(root, v2)) dirs.push_back((parent / name).string());
    return dirs;
}

}  // namespace

std::vector<std::string> cgroup_dirs(const std::string& name, const std::string& root) {
    return dirs_of(name, root, unified(root));
}

std::vector<std::string> cgroup_names(const std::string& root) {
    std::vector<std::string> names;
    for (const auto& parent : parents_of(root, unified(root))) {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(parent, ec)) {
            auto name = entry.path().filename().string();
            if (entry.is_directory(ec) && std::find(names.begin(), names.end(), name) == names.end()) {
                names.push_back(std::move(name));
            }
        }
    }
    return names;
}

PreparedCgroup prepare_cgroup(const std::string& name, const CgroupLimits& limits, const std::string& root) {
    const bool v2 = unified(root);
    const auto dirs = dirs_of(name, root, v2);
    PreparedCgroup prepared;
    if (v2) {
        // The controllers are handed down from the root to agentctl/ to NAME.
        enable_controllers(fs::path(root) / "cgroup.subtree_control");
        make_dir(fs::path(root) / k_parent);
        enable_controllers(fs::path(root) / k_parent / "cgroup.subtree_control");
        const auto dir = make_dir(dirs[0]);
        write_value(dir / "memory.max", limits.memory_bytes, prepared.kept);
        write_value(dir / "pids.max", limits.processes, prepared.kept);
        prepared.procs = {(dir / "cgroup.procs").string()};
        return prepared;
    }
    for (const auto* controller : {"memory", "pids"}) {
        std::error_code ec;
        if (!fs::exists(fs::path(root) / controller / "cgroup.procs", ec)) {
            throw Error(fmt::format("the {} cgroup controller is not mounted at {} (agentctl keeps each "
                                    "sandbox's proxy and resolver within limits there)",
                                    controller, (fs::path(root) / controller).string()),
                        fmt::format("mount it (`mount -t cgroup -o {0} cgroup {1}/{0}`); `ip netns exec` "
                                    "remounts /sys without the cgroup hierarchies",
                                    controller, root));
        }
    }
    const auto memory = make_dir(dirs[0]);
    const auto pids = make_dir(dirs[1]);
    write_value(memory / "memory.limit_in_bytes", limits.memory_bytes, prepared.kept);
    if (std::error_code ec; fs::exists(memory / "memory.kmem.tcp.limit_in_bytes", ec)) {
        write_value(memory / "memory.kmem.tcp.limit_in_bytes", limits.socket_memory_bytes, prepared.kept);
    }
    write_value(pids / "pids.max", limits.processes, prepared.kept);
    prepared.procs = {(memory / "cgroup.procs").string(), (pids / "cgroup.procs").string()};
    return prepared;
}

void remove_cgroup(const std::string& name, const std::string& root) {
    // Only the sandbox's host processes and what they started are in it (a
    // process joins before it runs; only root moves one in): whatever is
    // still there once they were stopped (a child serving a DNS connection,
    // which holds the listening socket too) goes with it.
    const auto dirs = cgroup_dirs(name, root);
    const auto members = [&] {
        std::vector<pid_t> pids;
        for (const auto& dir : dirs) {
            std::ifstream procs(fs::path(dir) / "cgroup.procs");
            for (pid_t pid = 0; procs >> pid;) pids.push_back(pid);
        }
        return pids;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (auto pids = members(); !pids.empty() && std::chrono::steady_clock::now() < deadline; pids = members()) {
        for (const pid_t pid : pids) ::kill(pid, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (const auto& dir : dirs) ::rmdir(dir.c_str());
}

}  // namespace agentctl::provider::incus
