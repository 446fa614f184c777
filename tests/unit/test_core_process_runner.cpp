// The real process runner against real processes: capture, exit versus
// signal, timeouts that kill the whole group, stdin, environment.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "support/recording_runner.hpp"

using namespace agentctl;
using namespace std::chrono_literals;

namespace {
ProcessResult sh(const std::string& script, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                 std::string stdin_data = {}) {
    auto runner = make_real_process_runner();
    ProcessRequest request;
    request.argv = {"sh", "-c", script};
    request.timeout = timeout;
    request.stdin_data = std::move(stdin_data);
    return runner->run(request);
}
}  // namespace

TEST_CASE("stdout and stderr are captured separately, and the exit code is returned") {
    auto r = sh("echo out; echo err >&2; exit 7");
    CHECK(r.out == "out\n");
    CHECK(r.err == "err\n");
    CHECK(r.exit_code == 7);
    CHECK_FALSE(r.signaled);
    CHECK_FALSE(r.ok());
    CHECK(r.pass_through_code() == 7);
}

TEST_CASE("large output on both pipes does not deadlock") {
    // 4 MiB on each pipe, interleaved: a reader that drains one pipe at a time would block forever.
    auto r =
        sh("i=0; while [ $i -lt 64 ]; do head -c 65536 /dev/zero; head -c 65536 /dev/zero >&2; i=$((i+1)); done", 30s);
    CHECK(r.ok());
    CHECK(r.out.size() == 64 * 65536);
    CHECK(r.err.size() == 64 * 65536);
}

TEST_CASE("death by a signal is told apart from an exit code") {
    auto r = sh("kill -TERM $$");
    CHECK(r.signaled);
    CHECK(r.signal == SIGTERM);
    CHECK(r.pass_through_code() == 128 + SIGTERM);
}

TEST_CASE("a timeout kills the whole process group, grandchildren included") {
    const auto marker = std::filesystem::temp_directory_path() / ("agentctl-runner-" + std::to_string(::getpid()));
    std::filesystem::remove(marker);
    const auto started = std::chrono::steady_clock::now();
    // The grandchild holds stdout open and would write the marker after 3 s.
    auto r = sh("(sleep 3; touch " + marker.string() + ") & sleep 30", 300ms);
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK(r.timed_out);
    CHECK(r.pass_through_code() == 124);
    CHECK(took < 5s);
    ::sleep(4);
    CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("stdin data reaches the child, and the environment is extended") {
    auto runner = make_real_process_runner();
    ProcessRequest request;
    request.argv = {"sh", "-c", "cat; printf '%s' \"$AGENTCTL_TEST_VALUE\""};
    request.stdin_data = "from stdin\n";
    request.env = {{"AGENTCTL_TEST_VALUE", "from env"}};
    auto r = runner->run(request);
    CHECK(r.out == "from stdin\nfrom env");
}

TEST_CASE("a command that does not exist is an error that names it") {
    auto runner = make_real_process_runner();
    ProcessRequest request;
    request.argv = {"agentctl-no-such-tool-xyz"};
    CHECK_THROWS_WITH(runner->run(request), "command not found: agentctl-no-such-tool-xyz");
}

TEST_CASE("shell_join quotes exactly what a POSIX shell needs") {
    CHECK(shell_join({"incus", "query", "/1.0"}) == "incus query /1.0");
    CHECK(shell_join({"echo", "a b", "it's", ""}) == "echo 'a b' 'it'\\''s' ''");
    CHECK(shell_quote("$HOME") == "'$HOME'");
    // Round trip through a real shell.
    auto r = sh("printf '%s|' " + shell_join({"a b", "it's", "$x", "*", ""}));
    CHECK(r.out == "a b|it's|$x|*||");
}

TEST_CASE("the recording runner records requests and answers from its script") {
    test::RecordingProcessRunner runner;
    ProcessResult scripted;
    scripted.exit_code = 3;
    scripted.out = "scripted";
    runner.expect(scripted);
    ProcessRequest request;
    request.argv = {"limactl", "list", "--json"};
    auto r = runner.run(request);
    CHECK(r.exit_code == 3);
    CHECK(r.out == "scripted");
    CHECK(runner.command_lines() == std::vector<std::string>{"limactl list --json"});
    CHECK_THROWS_WITH(runner.run(request), "unexpected command: limactl list --json");
}

TEST_CASE("at log level info every process run is logged with argv, its end and its time") {
    std::ostringstream log;
    auto previous = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
    logger->set_pattern("%v");
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
    (void)sh("exit 3");
    (void)sh("kill -TERM $$");
    auto runner = make_real_process_runner();
    ProcessRequest secret;
    secret.argv = {"env", "API_KEY=s3cret", "HOME=/h", "true"};
    (void)runner->run(secret);
    logger->set_level(spdlog::level::warn);
    (void)sh("exit 0");
    spdlog::set_default_logger(previous);
    const auto text = log.str();
    CHECK(text.find("run sh -c 'exit 3' -> exit code 3 (") == 0);
    CHECK(text.find("run sh -c 'kill -TERM $$' -> killed by signal 15 (") != std::string::npos);
    CHECK(text.find("run env 'API_KEY=(redacted)' HOME=/h true -> exit code 0 (") != std::string::npos);
    CHECK(text.find("s3cret") == std::string::npos);
    CHECK(text.find("sh -c 'exit 0'") == std::string::npos);  // nothing below info is logged
    CHECK(std::count(text.begin(), text.end(), '\n') == 3);
}
