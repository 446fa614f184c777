// The in-guest confinement probe, run for real with /bin/sh on this machine
// against real loopback sockets (the host gateway replaced by 127.0.0.1), with
// PATH narrowed to choose which of curl / bash+timeout / python3 "the guest" has.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include "agentctl/process.hpp"
#include "provider/lima/guest_probe.hpp"
#include "provider/lima/loopback.hpp"

using namespace agentctl;
using namespace agentctl::provider::lima;
namespace fs = std::filesystem;

namespace {

std::string which(const std::string& tool) {
    for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
        auto p = fs::path(dir) / tool;
        if (fs::exists(p)) return p.string();
    }
    ProcessRequest request;
    request.argv = {"sh", "-c", "command -v " + tool};
    auto r = make_real_process_runner()->run(request);
    auto out = r.out.substr(0, r.out.find('\n'));
    return out;
}

// Runs the probe with only `tools` (plus sh) on PATH.
ProbeOutcome run_probe(std::uint16_t port, const std::vector<std::string>& tools) {
    auto dir = fs::temp_directory_path() / ("agentctl-probe-bin-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& tool : tools) {
        auto path = which(tool);
        REQUIRE_FALSE(path.empty());
        fs::create_symlink(path, dir / tool);
    }
    ProcessRequest request;
    request.argv = {"/bin/sh", "-c", probe_script("127.0.0.1", std::to_string(port))};
    request.env = {{"PATH", dir.string()}, {"https_proxy", "http://127.0.0.1:9"}};
    request.timeout = std::chrono::seconds(30);
    auto result = make_real_process_runner()->run(request);
    fs::remove_all(dir);
    return parse_probe_output(result.out, result.exit_code);
}

std::uint16_t closed_port() {
    CanaryListener l;
    return l.port();  // closed again when `l` goes away
}

}  // namespace

TEST_CASE("curl: a refused direct connection verifies confinement", "[lima][probe]") {
    auto outcome = run_probe(closed_port(), {"curl"});
    CHECK(outcome.kind == ProbeKind::Refused);
    CHECK(outcome.tool == "curl");
    auto verdict = judge_probe(outcome, false, "192.168.5.2", 4711);
    CHECK(verdict.verdict == Verdict::Verified);
    CHECK(verdict.reason ==
          "a direct connection from the guest to 192.168.5.2:4711 (a port agentctl listens on) was "
          "refused (curl)");
}

TEST_CASE("curl: a connection that reaches the canary is an escape", "[lima][probe]") {
    CanaryListener canary;
    auto outcome = run_probe(canary.port(), {"curl"});
    // curl connected (the kernel accepted it) and then waited for an answer
    CHECK(canary.connected());
    auto verdict = judge_probe(outcome, true, "192.168.5.2", canary.port());
    CHECK(verdict.verdict == Verdict::Escaped);
}

TEST_CASE("bash with timeout is the second choice", "[lima][probe]") {
    auto outcome = run_probe(closed_port(), {"bash", "timeout"});
    CHECK(outcome.kind == ProbeKind::Refused);
    CHECK(outcome.tool == "bash");
    CanaryListener canary;
    outcome = run_probe(canary.port(), {"bash", "timeout"});
    CHECK(outcome.kind == ProbeKind::Connected);
    CHECK(canary.connected());
}

TEST_CASE("python3 is the third choice", "[lima][probe]") {
    auto outcome = run_probe(closed_port(), {"python3"});
    CHECK(outcome.kind == ProbeKind::Refused);
    CHECK(outcome.tool == "python3");
    CanaryListener canary;
    outcome = run_probe(canary.port(), {"python3"});
    CHECK(outcome.kind == ProbeKind::Connected);
}

TEST_CASE("bash without timeout does not count, no tool means not verified", "[lima][probe]") {
    auto outcome = run_probe(closed_port(), {"bash"});
    CHECK(outcome.kind == ProbeKind::NoTool);
    auto verdict = judge_probe(outcome, false, "192.168.5.2", 1);
    CHECK(verdict.verdict == Verdict::NotVerified);
    CHECK(verdict.reason.rfind("the guest has none of curl, bash with timeout, or python3", 0) == 0);
}

TEST_CASE("output without the marker is inconclusive, never verified", "[lima][probe]") {
    auto outcome = parse_probe_output("ssh: connect to host 127.0.0.1 port 50022: Connection refused\n", 255);
    CHECK(outcome.kind == ProbeKind::Inconclusive);
    CHECK(judge_probe(outcome, false, "192.168.5.2", 1).verdict == Verdict::NotVerified);
    CHECK(judge_probe(outcome, true, "192.168.5.2", 1).verdict == Verdict::Escaped);
}
