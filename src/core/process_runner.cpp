// The real ProcessRunner: Boost.Process v1 on one io_context.
//
// Output is read from both pipes concurrently (no deadlock when a child fills
// one of them), the child runs in its own process group so a timeout kills
// every descendant, and the raw wait status tells an exit from a signal.
#include <utility>  // must precede Asio (std::exchange in awaitable.hpp on g++ 12)

#include <algorithm>
#include <chrono>
#include <csignal>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/process.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"

namespace agentctl {

std::string ProcessResult::ending() const {
    if (timed_out) return "timed out";
    if (signaled) return fmt::format("killed by signal {}", signal);
    return fmt::format("exit code {}", exit_code);
}

namespace {

namespace bp = boost::process;
namespace asio = boost::asio;

boost::filesystem::path find_executable(const std::string& name) {
    if (name.find('/') != std::string::npos) {
        return boost::filesystem::path(name);
    }
    auto found = bp::search_path(name);
    if (found.empty()) {
        throw Error("command not found: " + name, "install " + name + " or put it on PATH");
    }
    return found;
}

bp::environment make_environment(const ProcessRequest& request) {
    bp::environment env = boost::this_process::environment();
    for (const auto& [key, value] : request.env) {
        // Not env[key]: Boost 1.74's environment lookup compares past the end
        // of entries shorter than the key (a heap overflow ASan catches).
        env.set(key, value);
    }
    return env;
}

void decode_status(int raw, ProcessResult& result) {
    if (WIFSIGNALED(raw)) {
        result.signaled = true;
        result.signal = WTERMSIG(raw);
    } else if (WIFEXITED(raw)) {
        result.exit_code = WEXITSTATUS(raw);
    } else {
        result.exit_code = raw;
    }
}

// Ignores SIGINT/SIGQUIT in agentctl while an interactive child owns the terminal,
// so Ctrl-C reaches the child and agentctl survives to pass its code through.
class IgnoreTerminalSignals {
public:
    IgnoreTerminalSignals() {
        m_int = std::signal(SIGINT, SIG_IGN);
        m_quit = std::signal(SIGQUIT, SIG_IGN);
    }
    ~IgnoreTerminalSignals() {
        std::signal(SIGINT, m_int);
        std::signal(SIGQUIT, m_quit);
    }
    IgnoreTerminalSignals(const IgnoreTerminalSignals&) = delete;
    IgnoreTerminalSignals& operator=(const IgnoreTerminalSignals&) = delete;

private:
    void (*m_int)(int) = nullptr;
    void (*m_quit)(int) = nullptr;
};

class RealProcessRunner final : public ProcessRunner {
public:
    ProcessResult run(const ProcessRequest& request) override {
        if (request.argv.empty()) {
            throw Error("internal error: empty command line");
        }
        auto exe = find_executable(request.argv[0]);
        std::vector<std::string> args(request.argv.begin() + 1, request.argv.end());
        auto env = make_environment(request);
        auto cwd = request.cwd.empty() ? boost::filesystem::current_path() : boost::filesystem::path(request.cwd);
        const auto start = std::chrono::steady_clock::now();
        auto result =
            request.interactive ? run_interactive(exe, args, env, cwd) : run_captured(request, exe, args, env, cwd);
        log_run(request, result, std::chrono::steady_clock::now() - start);
        return result;
    }

private:
    // An environment assignment in argv (`--env NAME=VALUE`) may carry a
    // secret: its value is not logged, except for a few harmless names.
    static std::string redacted(const std::string& word) {
        auto equals = word.find('=');
        if (equals == std::string::npos || equals == 0) return word;
        auto name = std::string_view(word).substr(0, equals);
        const bool env_name = std::all_of(name.begin(), name.end(), [](char c) {
            return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        });
        if (!env_name) return word;
        for (std::string_view harmless : {"HOME", "USER", "PATH", "LANG", "TERM", "SHELL", "PWD"}) {
            if (name == harmless) return word;
        }
        return std::string(name) + "=(redacted)";
    }

    // One line per process at log level info (-v): argv, how it ended, time.
    static void log_run(const ProcessRequest& request, const ProcessResult& result,
                        std::chrono::steady_clock::duration took) {
        if (!spdlog::should_log(spdlog::level::info)) return;
        std::string line;
        for (const auto& word : request.argv) line += (line.empty() ? "" : " ") + shell_quote(redacted(word));
        spdlog::info("run {} -> {} ({} ms)", line, result.ending(),
                     std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
    }

    static ProcessResult run_interactive(const boost::filesystem::path& exe, const std::vector<std::string>& args,
                                         bp::environment& env, const boost::filesystem::path& cwd) {
        IgnoreTerminalSignals ignore;
        std::error_code ec;
        bp::child child(exe, bp::args(args), env, bp::start_dir(cwd), ec);
        if (ec) {
            throw Error("cannot run " + exe.string() + ": " + ec.message());
        }
        child.wait(ec);
        ProcessResult result;
        decode_status(child.native_exit_code(), result);
        return result;
    }

    static ProcessResult run_captured(const ProcessRequest& request, const boost::filesystem::path& exe,
                                      const std::vector<std::string>& args, bp::environment& env,
                                      const boost::filesystem::path& cwd) {
        asio::io_context io;
        bp::async_pipe out_pipe(io);
        bp::async_pipe err_pipe(io);
        bp::async_pipe in_pipe(io);
        bp::group group;
        ProcessResult result;
        bool exited = false;
        bool out_done = false;
        bool err_done = false;
        asio::steady_timer deadline(io);
        auto maybe_finish = [&] {
            if (exited && out_done && err_done) deadline.cancel();
        };
        std::error_code ec;

        bp::child child(exe, bp::args(args), env, bp::start_dir(cwd), bp::std_out > out_pipe, bp::std_err > err_pipe,
                        bp::std_in < in_pipe, group, io, bp::on_exit([&](int, const std::error_code&) {
                            exited = true;
                            maybe_finish();
                        }),
                        ec);
        if (ec) {
            throw Error("cannot run " + exe.string() + ": " + ec.message());
        }

        std::array<char, 16384> out_buf{};
        std::array<char, 16384> err_buf{};
        std::function<void()> read_out;
        std::function<void()> read_err;
        read_out = [&] {
            out_pipe.async_read_some(asio::buffer(out_buf), [&](const boost::system::error_code& e, std::size_t n) {
                result.out.append(out_buf.data(), n);
                if (!e) return read_out();
                out_done = true;
                maybe_finish();
            });
        };
        read_err = [&] {
            err_pipe.async_read_some(asio::buffer(err_buf), [&](const boost::system::error_code& e, std::size_t n) {
                result.err.append(err_buf.data(), n);
                if (!e) return read_err();
                err_done = true;
                maybe_finish();
            });
        };
        read_out();
        read_err();

        if (request.stdin_data.empty()) {
            in_pipe.close();
        } else {
            asio::async_write(in_pipe, asio::buffer(request.stdin_data),
                              [&](const boost::system::error_code&, std::size_t) { in_pipe.close(); });
        }

        if (request.timeout) {
            deadline.expires_after(*request.timeout);
            deadline.async_wait([&](const boost::system::error_code& e) {
                if (e) return;  // cancelled: the child finished in time
                result.timed_out = true;
                std::error_code kill_ec;
                group.terminate(kill_ec);  // SIGKILL to the whole group
                boost::system::error_code close_ec;
                out_pipe.close(close_ec);  // a grandchild may still hold the pipes open
                err_pipe.close(close_ec);
            });
        }

        // Returns once the child has exited and both pipes are at EOF (or were
        // closed by the deadline): then no handler is left pending.
        io.run();

        if (exited) decode_status(child.native_exit_code(), result);
        if (result.timed_out) {
            result.signaled = false;
            result.exit_code = 124;
        }
        return result;
    }
};

}  // namespace

std::unique_ptr<ProcessRunner> make_real_process_runner() { return std::make_unique<RealProcessRunner>(); }

}  // namespace agentctl
