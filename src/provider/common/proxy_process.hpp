// Starting, finding and stopping a sandbox's egress proxy process: `agentctl
// egress-proxy` re-run from the agentctl executable, detached (double fork +
// setsid) so it outlives the agentctl command that started it. Shared by the
// Lima provider (proxy on 127.0.0.1) and the Incus provider (proxy on the
// sandbox bridge's host address, run as an unprivileged user).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::provider::common {

struct Credentials {
    uid_t uid = 0;
    gid_t gid = 0;
};

struct SpawnOptions {
    std::string output;       // stdout and stderr are appended here (opened before dropping privileges)
    std::string working_dir;  // chdir here before exec (and before dropping privileges); empty: unchanged
    // Drop to this user (supplementary groups cleared) before exec. The child
    // exits with 126 when it cannot.
    std::optional<Credentials> run_as;
    // With run_as: capabilities (CAP_* numbers) the program keeps as that
    // user, as ambient capabilities (what dnsmasq needs to serve DHCP and DNS
    // on port 53 and 67 without ever being root).
    std::vector<int> capabilities;
    // cgroup.procs files the child joins before anything else (its sockets and
    // memory are charged there from the start). The child exits with 126 when
    // it cannot.
    std::vector<std::string> cgroups;
    // What the process reads on its stdin (a pipe holding exactly this, then
    // its end), instead of /dev/null: how the egress proxy gets its secrets,
    // which never go into an argument, the environment or a file. At most 64 KiB.
    std::string input;
};

// Runs `argv` (argv[0] an absolute path) detached: new session, stdin from
// `options.input` (else /dev/null), none of this process's other descriptors
// open, and none of its environment but a fixed PATH (and the sanitizers'
// options, for test builds). Returns the grandchild's pid. Throws agentctl::Error when it cannot
// fork, or when `options.input` does not fit a pipe.
int spawn_detached(const std::vector<std::string>& argv, const SpawnOptions& options);

// True when a TCP connection to ADDRESS:PORT (IPv4 or IPv6 literal) is accepted.
[[nodiscard]] bool tcp_port_listening(const std::string& address, std::uint16_t port);

// Starts `argv` with spawn_detached, then waits until `pid_file` names the
// started process (unless it is empty) and ADDRESS:PORT accepts connections. Returns that pid. On
// timeout (or if the process dies) kills what it started and throws
// agentctl::Error quoting the last lines of `options.output`.
int start_detached_proxy(const std::vector<std::string>& argv, const SpawnOptions& options, const std::string& pid_file,
                         const std::string& address, std::uint16_t port,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Decides whether a live pid really is the proxy that the pid file belongs to
// (a pid file written by an unprivileged process must not make agentctl
// signal an arbitrary process). Empty: any live process is accepted.
using PidCheck = std::function<bool(int pid)>;

// The pid in `pid_file` if that process is alive (and passes `is_ours`), else 0.
[[nodiscard]] int running_proxy_pid(const std::string& pid_file, const PidCheck& is_ours = {});

// terminate() (process_identity.hpp) for the proxy named by `pid_file`;
// removes the pid file. nullopt when no such proxy was running; else
// terminate()'s answer. Never throws.
std::optional<bool> stop_proxy(const std::string& pid_file, std::chrono::milliseconds grace = std::chrono::seconds(5),
                               const PidCheck& is_ours = {});

// Linux: true when /proc/PID's command line is `... egress-proxy ...` and its
// working directory is `working_dir`.
[[nodiscard]] bool is_egress_proxy_in(int pid, const std::string& working_dir);

// True when one of the process's command-line arguments is exactly `argument`.
[[nodiscard]] bool process_has_argument(int pid, std::string_view argument);

}  // namespace agentctl::provider::common
