// Which process agentctl started, so that it never trusts or signals another
// one that took its place: a sandbox's host processes (egress proxy,
// resolver) write their own pid files, which a process running as the same
// user could rewrite. agentctl records, in a file only root can write, what
// identifies the process it started: its pid, its start time (clock ticks
// since boot, field 22 of /proc/PID/stat, which stays with the pid for the
// process's whole life, across execve), the boot it started in, and the
// executable it runs (device and inode, so an agentctl upgraded on disk does
// not disown the proxy it started). A process is "the one agentctl started"
// only while all four match.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl::provider::common {

struct ProcessIdentity {
    int pid = 0;
    unsigned long long start_ticks = 0;
    std::string boot_id;
    std::uint64_t exe_device = 0;
    std::uint64_t exe_inode = 0;

    bool operator==(const ProcessIdentity&) const = default;
};

// Live process `pid` started from `exe` (the path it was started with: it may
// not have reached execve yet). nullopt when it is gone or a zombie, or `exe`
// cannot be read.
[[nodiscard]] std::optional<ProcessIdentity> identity_of(int pid, const std::string& exe);

// Live process `pid` as it runs now (its executable from /proc/PID/exe).
[[nodiscard]] std::optional<ProcessIdentity> running_identity(int pid);

// The record file: written atomically, mode 0600 (by root, in a directory
// only root writes). read_identity: nullopt when there is none or it is not
// a record agentctl wrote.
void write_identity(const std::string& path, const ProcessIdentity& identity);
[[nodiscard]] std::optional<ProcessIdentity> read_identity(const std::string& path);

// The pid of the recorded process while it is alive and still the one
// recorded (pid, start time, boot, executable); else 0.
[[nodiscard]] int verified_pid(const std::string& record);

// SIGTERM to `pid`, SIGKILL once `still_there()` has stayed true for `grace`;
// returns once `still_there()` is false: true then, false if it still was
// `kill_wait` after SIGKILL (a process the kernel takes that long to tear
// down). Never throws.
inline constexpr std::chrono::seconds k_kill_wait{30};
bool terminate(int pid, std::chrono::milliseconds grace, const std::function<bool()>& still_there,
               std::chrono::milliseconds kill_wait = k_kill_wait);

// terminate() for the recorded process if it is the one recorded; removes the
// record. nullopt when no recorded process was running; else terminate()'s
// answer. Never throws.
std::optional<bool> stop_recorded(const std::string& record, std::chrono::milliseconds grace);

// Field `name` ("Uid", "NSpid") of /proc/PID/status under `proc_root`: the
// rest of its line after the colon and the whitespace; nullopt without it.
[[nodiscard]] std::optional<std::string> status_field(int pid, std::string_view name,
                                                      const std::string& proc_root = "/proc");

// The real uid of live process `pid`.
[[nodiscard]] std::optional<uid_t> process_uid(int pid);

// How status names a uid: the user's name, or `uid N` when it has none.
[[nodiscard]] std::string user_text(uid_t uid);

// The process that listens on TCP ADDRESS:PORT (IPv4), found from the
// socket's inode in /proc/net/tcp and the processes' descriptors; 0 when none
// (or it cannot be told).
[[nodiscard]] int tcp_listener_pid(const std::string& address, std::uint16_t port);

}  // namespace agentctl::provider::common
