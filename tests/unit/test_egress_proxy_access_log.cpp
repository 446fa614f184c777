#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "egress_proxy/access_log.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "egress_proxy/refusal_log.hpp"

namespace fs = std::filesystem;
using agentctl::egress_proxy::AccessLog;
using agentctl::egress_proxy::kept_log_files;
using agentctl::egress_proxy::print_network_log;
using agentctl::egress_proxy::RefusalLog;

namespace {

// A log request that prints JSON Lines (`json`), following with `follow`.
[[maybe_unused]] agentctl::LogRequest json_lines(bool json = true, bool follow = false) {
    agentctl::LogRequest request;
    request.json = json;
    request.follow = follow;
    return request;
}

fs::path fresh_dir(const std::string& name) {
    auto dir = fs::temp_directory_path() / ("agentctl-test-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::vector<nlohmann::json> read_lines(const fs::path& path) {
    std::vector<nlohmann::json> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
}

nlohmann::json decision(int i) {
    return {{"time", "2026-01-01T00:00:00.000Z"},
            {"event", "decision"},
            {"id", i},
            {"client", "127.0.0.1:5000"},
            {"method", "CONNECT"},
            {"host", "allowed.test"},
            {"port", 443},
            {"decision", "allow"},
            {"rule", "allowed.test:443"},
            {"origin", "--allow"},
            {"address", "198.51.100.2"}};
}

agentctl::egress_proxy::LogLine refusal(int i) {
    agentctl::egress_proxy::LogLine line("decision");
    line.add("host", "refused" + std::to_string(i) + ".test").add("decision", "deny").add("reason", "not-allowlisted");
    return line;
}

void append(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << text;
}

}  // namespace

TEST_CASE("the log is JSON Lines and rotates at its size cap, keeping one old file") {
    auto dir = fresh_dir("log");
    auto path = dir / "egress-proxy.log";
    {
        AccessLog log(path.string(), 2000);
        for (int i = 0; i < 40; ++i) log.write(decision(i));
    }
    REQUIRE(fs::exists(path));
    REQUIRE(fs::exists(dir / "egress-proxy.log.1"));
    CHECK(fs::file_size(path) <= 2000);
    CHECK(fs::file_size(dir / "egress-proxy.log.1") <= 2000);
    auto current = read_lines(path);
    auto old = read_lines(dir / "egress-proxy.log.1");
    REQUIRE_FALSE(current.empty());
    CHECK(current.back()["id"] == 39);
    CHECK(old.back()["id"].get<int>() + 1 == current.front()["id"].get<int>());
    CHECK(fs::directory_iterator(dir) != fs::directory_iterator());
    int files = 0;
    for ([[maybe_unused]] auto& entry : fs::directory_iterator(dir)) ++files;
    CHECK(files == 2);
    fs::remove_all(dir);
}

TEST_CASE("print_network_log shows a table or the raw lines") {
    auto dir = fresh_dir("view");
    auto path = dir / "egress-proxy.log";
    {
        AccessLog log(path.string(), 1 << 20);
        log.write(decision(1));
        auto denied = decision(2);
        denied.erase("rule");
        denied.erase("origin");
        denied.erase("address");
        denied["decision"] = "deny";
        denied["reason"] = "not-allowlisted";
        denied["host"] = "other.test";
        log.write(denied);
        log.write({{"time", "t"},
                   {"event", "close"},
                   {"host", "allowed.test"},
                   {"port", 443},
                   {"client", "c"},
                   {"bytes_up", 10},
                   {"bytes_down", 20},
                   {"duration_ms", 5}});
    }
    std::ostringstream table;
    CHECK(agentctl::egress_proxy::print_network_log(path.string(), agentctl::LogRequest{}, table) == 0);
    auto text = table.str();
    CHECK(text.find("DESTINATION") != std::string::npos);
    CHECK(text.find("allowed.test:443") != std::string::npos);
    CHECK(text.find("allowed.test:443 (--allow) -> 198.51.100.2") != std::string::npos);
    CHECK(text.find("other.test:443") != std::string::npos);
    CHECK(text.find("not-allowlisted") != std::string::npos);
    CHECK(text.find("up 10 B, down 20 B") != std::string::npos);

    std::ostringstream json;
    agentctl::egress_proxy::print_network_log(path.string(), json_lines(), json);
    std::istringstream lines(json.str());
    int count = 0;
    for (std::string line; std::getline(lines, line); ++count) CHECK_NOTHROW(nlohmann::json::parse(line));
    CHECK(count == 3);

    std::ostringstream missing;
    CHECK(agentctl::egress_proxy::print_network_log((dir / "none.log").string(), json_lines(), missing) == 0);
    CHECK(missing.str().empty());
    fs::remove_all(dir);
}

TEST_CASE("follow mode keeps printing across rotation until SIGINT") {
    auto dir = fresh_dir("follow");
    auto path = dir / "egress-proxy.log";
    AccessLog log(path.string(), 600);  // small cap: rotates every couple of lines
    log.write(decision(0));
    std::ostringstream out;
    std::thread follower(
        [&] { agentctl::egress_proxy::print_network_log(path.string(), json_lines(true, true), out); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int i = 1; i < 10; ++i) {
        log.write(decision(i));
        std::this_thread::sleep_for(std::chrono::milliseconds(120));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(::getpid(), SIGINT);
    follower.join();
    std::istringstream lines(out.str());
    std::vector<int> ids;
    for (std::string line; std::getline(lines, line);) ids.push_back(nlohmann::json::parse(line)["id"].get<int>());
    REQUIRE(fs::exists(dir / "egress-proxy.log.1"));
    std::vector<int> expected{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK(ids == expected);
    fs::remove_all(dir);
}

TEST_CASE("deferred log lines reach the file at flush, whole, rotating between lines") {
    auto dir = fresh_dir("deferred");
    auto path = dir / "egress-proxy.log";
    int armed = 0;
    {
        AccessLog log(path.string(), 2000);
        log.defer_writes([&armed] { ++armed; });
        for (int i = 0; i < 3; ++i) log.write(decision(i));
        CHECK(armed == 1);  // once per batch, not per line
        CHECK(log.has_pending());
        CHECK(fs::file_size(path) == 0);
        log.flush();
        CHECK_FALSE(log.has_pending());
        CHECK(read_lines(path).size() == 3);
        for (int i = 3; i < 40; ++i) log.write(decision(i));
        CHECK(armed == 2);
        log.flush();
        CHECK(fs::file_size(path) <= 2000);
        CHECK(fs::file_size(dir / "egress-proxy.log.1") <= 2000);
        CHECK(read_lines(path).back()["id"] == 39);
        log.write(decision(40));
    }  // the destructor writes what is still queued
    auto current = read_lines(path);
    auto old = read_lines(dir / "egress-proxy.log.1");
    CHECK(current.back()["id"] == 40);
    CHECK(old.back()["id"].get<int>() + 1 == current.front()["id"].get<int>());
    fs::remove_all(dir);
}

TEST_CASE("lines written from several threads at once, with flushes racing them, all arrive whole") {
    // The proxy's event loops share one log: each thread's lines must arrive
    // complete and in that thread's order, none lost and none interleaved.
    auto dir = fresh_dir("threads");
    auto path = dir / "egress-proxy.log";
    constexpr int k_threads = 4;
    constexpr int k_lines = 3000;
    std::atomic<int> armed{0};
    {
        AccessLog log(path.string(), 64ULL * 1024 * 1024);
        log.defer_writes([&armed] { ++armed; });
        std::atomic<bool> done{false};
        std::thread flusher([&] {
            while (!done) {
                log.flush();
                std::this_thread::yield();
            }
        });
        std::vector<std::thread> writers;
        for (int t = 0; t < k_threads; ++t) {
            writers.emplace_back([&log, t] {
                for (int i = 0; i < k_lines; ++i) {
                    if (i % 2 == 0) {
                        log.write(decision(t * k_lines + i));
                    } else {
                        agentctl::egress_proxy::LogLine line("decision");
                        line.add("id", t * k_lines + i).add("client", "127.0.0.1:5000");
                        log.write(line);
                    }
                }
            });
        }
        for (auto& writer : writers) writer.join();
        done = true;
        flusher.join();
    }
    auto lines = read_lines(path);  // throws on a torn or interleaved line
    REQUIRE(lines.size() == static_cast<std::size_t>(k_threads * k_lines));
    std::vector<int> next(k_threads, 0);
    for (const auto& line : lines) {
        int id = line["id"].get<int>();
        int thread = id / k_lines;
        CHECK(id % k_lines == next[thread]);
        next[thread] = id % k_lines + 1;
    }
    CHECK(armed > 0);
    fs::remove_all(dir);
}

TEST_CASE("an event loop queueing a line does not wait while another thread's write to the log is stuck") {
    // The log is a pipe of one page that the test fills, so the flushing
    // thread's write(2) blocks until the test reads; meanwhile a line is
    // queued from here.
    auto dir = fresh_dir("stuck");
    auto path = dir / "egress-proxy.log";
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(reader >= 0);
    REQUIRE(::fcntl(reader, F_SETPIPE_SZ, 4096) >= 4096);
    std::string received;
    const auto drain = [&] {
        char buffer[65536];
        ssize_t n = 0;
        while ((n = ::read(reader, buffer, sizeof buffer)) > 0) received.append(buffer, static_cast<std::size_t>(n));
    };
    constexpr int k_lines = 200;  // past the pipe's page, short of the 64 KiB that flushes a queue at once
    {
        AccessLog log(path.string(), 64ULL * 1024 * 1024);
        log.defer_writes([] {});
        for (int i = 0; i < k_lines; ++i) log.write(decision(i));
        std::promise<long> flusher_tid;
        std::atomic<bool> flushed{false};
        std::thread flusher([&] {
            flusher_tid.set_value(::syscall(SYS_gettid));
            log.flush();
            flushed = true;
        });
        // The event: the flusher sits in write(2) (its /proc syscall line names it).
        const auto syscall_file = "/proc/self/task/" + std::to_string(flusher_tid.get_future().get()) + "/syscall";
        const auto in_write = [&] {
            std::ifstream in(syscall_file);
            long number = -1;
            return (in >> number) && number == SYS_write;
        };
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!in_write() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        REQUIRE(in_write());
        auto queued = std::async(std::launch::async, [&log] { log.write(decision(k_lines)); });
        // A deadline for a loaded machine: the queueing call returns while the write is stuck.
        CHECK(queued.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
        CHECK_FALSE(flushed);  // the flusher was stuck all along
        while (!flushed) {
            drain();
            std::this_thread::yield();
        }
        flusher.join();
        queued.wait();
        log.flush();
    }
    drain();
    ::close(reader);
    std::istringstream lines(received);
    int next = 0;
    for (std::string line; std::getline(lines, line);) CHECK(nlohmann::json::parse(line)["id"] == next++);
    CHECK(next == k_lines + 1);  // every line, whole and in order
    fs::remove_all(dir);
}

TEST_CASE("a LogLine is the JSON object its fields make, escaped as nlohmann::json escapes them") {
    using agentctl::egress_proxy::LogLine;
    const std::string awkward = std::string("quote \" backslash \\ tab \t newline \n bell \x07 ") + "caf\xc3\xa9";
    LogLine line("decision");
    line.add("id", std::uint64_t{42}).add("port", std::uint16_t{443}).add("status", 403u).add("delta", -3);
    line.add("host", "example.com").add("detail", awkward).add("reused", true).add("timed_out", false);
    line.add("dns_ms", 0.125).add("whole_ms", 2.0);
    auto text = line.text();
    auto parsed = nlohmann::json::parse(text);
    CHECK(parsed["event"] == "decision");
    CHECK(parsed["time"].get<std::string>().size() == std::string("2026-01-02T03:04:05.678Z").size());
    CHECK(parsed["id"] == 42);
    CHECK(parsed["port"] == 443);
    CHECK(parsed["status"] == 403);
    CHECK(parsed["delta"] == -3);
    CHECK(parsed["host"] == "example.com");
    CHECK(parsed["detail"] == awkward);
    CHECK(parsed["reused"] == true);
    CHECK(parsed["timed_out"] == false);
    CHECK(parsed["dns_ms"] == 0.125);
    CHECK(parsed["whole_ms"] == 2.0);
    // The escaped string is byte for byte what a JSON document would write.
    CHECK(text.find(nlohmann::json(awkward).dump()) != std::string::npos);
    // Fields keep the order they were added in, after time and event.
    CHECK(text.find("\"event\":\"decision\",\"id\":42,\"port\":443,") != std::string::npos);

    // Bytes that are not UTF-8 are replaced, never written raw into the log.
    LogLine bad("decision");
    bad.add("method", std::string("GE\xff\xfeT"));
    auto replaced = nlohmann::json::parse(bad.text());
    CHECK(replaced["method"] == "GE\xef\xbf\xbd\xef\xbf\xbdT");
}

TEST_CASE("LogLine and JSON entries go to the same log, one line each") {
    auto dir = fresh_dir("logline");
    auto path = dir / "egress-proxy.log";
    {
        AccessLog log(path.string(), 1 << 20);
        agentctl::egress_proxy::LogLine line("close");
        line.add("id", 7).add("bytes_up", std::uint64_t{10});
        log.write(line);
        log.write(decision(8));
    }
    auto lines = read_lines(path);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0]["event"] == "close");
    CHECK(lines[0]["bytes_up"] == 10);
    CHECK(lines[1]["id"] == 8);
}

TEST_CASE("refusals beyond the per-second share are counted and summed up once the second is over", "[egress_proxy]") {
    const auto dir = fresh_dir("refusals");
    const auto path = dir / "egress.log.refused";
    {
        AccessLog log(path.string(), 10 * 1024 * 1024);
        RefusalLog refusals(log, 5);
        const auto t0 = RefusalLog::Clock::now();
        for (int i = 0; i < 200; ++i) refusals.write(refusal(i), i % 2 ? "not-allowlisted" : "host-address", t0);
        CHECK(read_lines(path).size() == 5);
        refusals.tick(t0 + std::chrono::milliseconds(500));  // the second is not over
        CHECK(read_lines(path).size() == 5);
        refusals.tick(t0 + std::chrono::seconds(1));
        const auto lines = read_lines(path);
        REQUIRE(lines.size() == 6);
        CHECK(lines[5]["event"] == "refusals-suppressed");
        CHECK(lines[5]["suppressed"] == 195);
        CHECK(lines[5]["by_reason"]["not-allowlisted"] == 98);
        CHECK(lines[5]["by_reason"]["host-address"] == 97);
        // The next second has its share again.
        refusals.write(refusal(200), "not-allowlisted", t0 + std::chrono::seconds(2));
        CHECK(read_lines(path).size() == 7);
        for (int i = 0; i < 10; ++i) refusals.write(refusal(i), "not-allowlisted", t0 + std::chrono::seconds(2));
    }
    // The destructor sums up what was counted and not yet written.
    const auto lines = read_lines(path);
    REQUIRE(lines.size() == 12);
    CHECK(lines.back()["suppressed"] == 6);
    fs::remove_all(dir);
}

TEST_CASE("logs --network reads every kept file, merged in time order", "[egress_proxy]") {
    const auto dir = fresh_dir("kept-files");
    const auto log = (dir / "egress.log").string();
    CHECK(kept_log_files(log) == std::vector<std::string>{log + ".1", log, log + ".refused.1", log + ".refused"});
    auto line = [](const std::string& time, const std::string& host) {
        return nlohmann::json{{"time", time}, {"event", "decision"}, {"host", host}}.dump() + "\n";
    };
    append(log + ".1", line("2026-01-01T00:00:01.000Z", "one") + line("2026-01-01T00:00:04.000Z", "four"));
    append(log, line("2026-01-01T00:00:06.000Z", "six"));
    append(log + ".refused.1", line("2026-01-01T00:00:02.000Z", "two"));
    append(log + ".refused", line("2026-01-01T00:00:03.000Z", "three") + line("2026-01-01T00:00:05.000Z", "five"));
    std::ostringstream out;
    CHECK(print_network_log(log, json_lines(), out) == 0);
    std::vector<std::string> hosts;
    std::istringstream lines(out.str());
    for (std::string text; std::getline(lines, text);) hosts.push_back(nlohmann::json::parse(text)["host"]);
    CHECK(hosts == std::vector<std::string>{"one", "two", "three", "four", "five", "six"});
    fs::remove_all(dir);
}

TEST_CASE("logs --network escapes control characters, whatever is in the file", "[egress_proxy]") {
    const auto dir = fresh_dir("escapes");
    const auto log = (dir / "egress.log").string();
    // A line appended by hand with raw terminal escapes (not JSON), a JSON line
    // whose name carries one (escaped in the file, decoded by the table), and a
    // C1 control (U+009B, a one-byte CSI for some terminals).
    append(log, "\x1b]0;owned\x07\x1b[2J raw line\n");
    append(log, nlohmann::json{{"time", "2026-01-01T00:00:01.000Z"},
                               {"event", "decision"},
                               {"host", "a\x1b[31m.test"},
                               {"decision", "deny"}}
                        .dump() +
                    "\n");
    append(log,
           "c1 \xc2\x9b"
           "31m control\n");
    for (bool json : {false, true}) {
        std::ostringstream out;
        print_network_log(log, json_lines(json), out);
        const auto text = out.str();
        CAPTURE(json, text);
        for (char c : text) CHECK((c == '\n' || static_cast<unsigned char>(c) >= 0x20));
        CHECK(text.find('\x7f') == std::string::npos);
        CHECK(text.find("\xc2\x9b") == std::string::npos);
        CHECK_THAT(text, Catch::Contains("\\u001b]0;owned\\u0007\\u001b[2J raw line"));
        CHECK_THAT(text, Catch::Contains("\\u009b31m control"));
        CHECK_THAT(text, Catch::Contains("a\\u001b[31m.test"));
    }
    fs::remove_all(dir);
}
