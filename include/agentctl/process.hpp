// Running external tools (limactl, sandbox-exec, incus, powershell).
//
// Providers never build shell strings: a command is an argv vector. The real
// runner (Boost.Process) captures stdout and stderr concurrently, kills the whole
// process group on timeout and tells a normal exit from death by a signal. Tests
// use a recording runner that returns scripted results.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agentctl {

struct ProcessRequest {
    std::vector<std::string> argv;           // argv[0] is looked up on PATH
    std::map<std::string, std::string> env;  // added to (or replacing in) the inherited environment
    std::string cwd;                         // empty: inherit
    std::string stdin_data;                  // written to the child's stdin, then closed
    std::optional<std::chrono::milliseconds> timeout;
    // Interactive: the child inherits this process's stdin/stdout/stderr (the
    // terminal); nothing is captured. Used by shell and `exec -t`.
    bool interactive = false;
};

struct ProcessResult {
    int exit_code = 0;  // valid when !signaled && !timed_out
    int signal = 0;     // the terminating signal when signaled
    bool signaled = false;
    bool timed_out = false;  // the deadline passed and the process group was killed
    std::string out;
    std::string err;

    [[nodiscard]] bool ok() const { return !signaled && !timed_out && exit_code == 0; }
    // The code agentctl should exit with to pass this result through: the exit
    // code, or 128+signal like a shell does.
    [[nodiscard]] int pass_through_code() const { return signaled ? 128 + signal : (timed_out ? 124 : exit_code); }
    // How the process ended, for messages and logs: "exit code N", "killed by
    // signal N" or "timed out".
    [[nodiscard]] std::string ending() const;
};

class ProcessRunner {
public:
    virtual ~ProcessRunner() = default;
    // Runs the command to completion. Throws agentctl::Error only when it cannot
    // be started at all (not found, not executable); a non-zero exit is a result.
    virtual ProcessResult run(const ProcessRequest& request) = 0;
};

// The real runner. Not thread-safe across concurrent run() calls.
[[nodiscard]] std::unique_ptr<ProcessRunner> make_real_process_runner();

// `a b 'c d'`: argv rendered so that a POSIX shell runs exactly this argv.
[[nodiscard]] std::string shell_quote(const std::string& word);
[[nodiscard]] std::string shell_join(const std::vector<std::string>& argv);

}  // namespace agentctl
