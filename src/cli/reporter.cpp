#include "cli/reporter.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace agentctl::cli {
namespace {

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

void write_stderr(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
}

class TerminalReporter final : public Reporter {
public:
    TerminalReporter(bool json, bool terminal, bool color) : m_json(json), m_terminal(terminal), m_color(color) {}

    ~TerminalReporter() override { finish_step(); }
    TerminalReporter(const TerminalReporter&) = delete;
    TerminalReporter& operator=(const TerminalReporter&) = delete;

    void step(std::string_view message) override {
        finish_step();
        m_timed = std::string(message);
        m_timed_start = std::chrono::steady_clock::now();
        if (m_json) return;
        if (!m_terminal) {
            write_stderr(fmt::format("agentctl: {}...\n", message));
            return;
        }
        std::lock_guard lock(m_mutex);
        m_current = std::string(message);
        m_running = true;
        m_spinner = std::thread([this] { spin(); });
    }

    void notice(std::string_view message) override {
        finish_step();
        write_stderr(fmt::format("agentctl: {}\n", message));
    }

    void warning(std::string_view message) override {
        finish_step();
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
        const char* done = m_color ? "\033[32mok\033[0m" : "ok";
        write_stderr(fmt::format("\r{} {}\033[K\n", done, m_current));
    }

    void finish_step() {
        stop_spinner();
        if (m_timed.empty()) return;
        // Each step's time at log level info (-v), after its line.
        spdlog::info(
            "step \"{}\" took {} ms", m_timed,
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - m_timed_start)
                .count());
        m_timed.clear();
    }

    void stop_spinner() {
        {
            std::lock_guard lock(m_mutex);
            if (!m_running) return;
            m_running = false;
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
    std::string m_current;
    bool m_running = false;
    std::string m_timed;  // the step being timed (empty: none)
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
    return std::make_unique<TerminalReporter>(json, spinner, use_color());
}

}  // namespace agentctl::cli
