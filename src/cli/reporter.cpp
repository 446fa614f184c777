#include "cli/reporter.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agentctl/error.hpp"

namespace agentctl::cli {
namespace {

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

// For the fault-injection tests only (integration/incus/faults.sh), and the
// one place agentctl reads it: AGENTCTL_FAULT=TEXT fails the step whose
// message starts with TEXT as if its work had failed; AGENTCTL_FAULT=kill:TEXT
// kills agentctl (SIGKILL) as that step begins. So a test can check what a
// failure or a kill at each step leaves behind.
void inject_fault(std::string_view message) {
    const char* fault = std::getenv("AGENTCTL_FAULT");
    if (fault == nullptr || *fault == '\0') return;
    std::string_view wanted(fault);
    const bool kill = wanted.starts_with("kill:");
    if (kill) wanted.remove_prefix(5);
    if (!message.starts_with(wanted)) return;
    if (kill) ::kill(::getpid(), SIGKILL);
    throw Error(fmt::format("injected fault at the step \"{}\" (AGENTCTL_FAULT)", message));
}

void write_stderr(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
}

class StderrReporter final : public Reporter {
public:
    StderrReporter(bool json, bool terminal, bool color) : m_json(json), m_terminal(terminal), m_color(color) {}

    ~StderrReporter() override {
        finish_step(false);
        log_step_time("took");
    }
    StderrReporter(const StderrReporter&) = delete;
    StderrReporter& operator=(const StderrReporter&) = delete;

    void step(std::string_view message) override {
        show_step(message);
        inject_fault(message);
    }

    void show_step(std::string_view message) {
        end_step();
        m_timed = std::string(message);
        m_timed_start = std::chrono::steady_clock::now();
        if (m_json) return;
        m_current = std::string(message);
        if (!m_terminal) {
            write_stderr(fmt::format("agentctl: {}...\n", message));
            return;
        }
        std::lock_guard lock(m_mutex);
        m_running = true;
        m_failed = false;
        m_spinner = std::thread([this] { spin(); });
    }

    void fail_step() override {
        log_step_time("failed after");
        if (m_json || m_current.empty()) return;
        if (m_terminal) {
            finish_step(true);
        } else {
            write_stderr(fmt::format("agentctl: failed: {}\n", m_current));
        }
        m_current.clear();
    }

    void notice(std::string_view message) override {
        end_step();
        write_stderr(fmt::format("agentctl: {}\n", message));
    }

    void warning(std::string_view message) override {
        end_step();
        if (m_color) {
            write_stderr(fmt::format("\033[1;33mWARNING:\033[0m {}\n", message));
        } else {
            write_stderr(fmt::format("WARNING: {}\n", message));
        }
    }

private:
    void spin() {
        static constexpr const char* k_frames[] = {"|", "/", "-", "\\"};
        std::unique_lock lock(m_mutex);
        for (std::size_t frame = 0; m_running; ++frame) {
            write_stderr(fmt::format("\r{} {}...", k_frames[frame % 4], m_current));
            m_wake.wait_for(lock, std::chrono::milliseconds(120), [this] { return !m_running; });
        }
        const char* done =
            m_failed ? (m_color ? "\033[1;31mfailed\033[0m" : "failed") : (m_color ? "\033[32mok\033[0m" : "ok");
        write_stderr(fmt::format("\r{} {}\033[K\n", done, m_current));
    }

    // The running step finished well: anything printed next is not part of it.
    void end_step() {
        finish_step(false);
        m_current.clear();
        log_step_time("took");
    }

    // Each step's time at log level info (-v), after its line.
    void log_step_time(std::string_view outcome) {
        if (m_timed.empty()) return;
        const auto elapsed = std::chrono::steady_clock::now() - m_timed_start;
        spdlog::info("step \"{}\" {} {} ms", m_timed, outcome,
                     std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count());
        m_timed.clear();
    }

    // Stops the spinner, which prints the step's final line: "ok" or "failed".
    void finish_step(bool failed) {
        {
            std::lock_guard lock(m_mutex);
            if (!m_running) return;
            m_running = false;
            m_failed = failed;
        }
        m_wake.notify_all();
        if (m_spinner.joinable()) m_spinner.join();
    }

    bool m_json;
    bool m_terminal;
    bool m_color;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::thread m_spinner;
    std::string m_current;  // the step in progress; empty when none
    bool m_running = false;
    bool m_failed = false;
    std::string m_timed;  // the step being timed (empty: none), also with --output json
    std::chrono::steady_clock::time_point m_timed_start;
};

}  // namespace

bool use_color() {
    const char* no_color = std::getenv("NO_COLOR");
    return stderr_is_terminal() && (no_color == nullptr || *no_color == '\0');
}

std::unique_ptr<Reporter> make_terminal_reporter(bool json) {
    // With log lines on stderr (-v) a spinner would be torn apart: plain step lines then.
    const bool spinner = stderr_is_terminal() && !spdlog::should_log(spdlog::level::info);
    return std::make_unique<StderrReporter>(json, spinner, use_color());
}

}  // namespace agentctl::cli
