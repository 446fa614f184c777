// The start gate: the LXC pre-start hook line agentctl puts in a sandbox
// container's raw.lxc, and the one-time pass it checks (run here through
// /bin/sh as LXC runs it, with LXC's own arguments after it).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

#include "agentctl/process.hpp"
#include "provider/incus/lifecycle/start_gate.hpp"
#include "support/temp_dir.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

// What LXC runs for `line`: `exec HOOK NAME lxc pre-start` through /bin/sh -c.
int run_hook(const std::string& line) {
    const std::string key = "lxc.hook.pre-start = ";
    REQUIRE(line.starts_with(key));
    auto runner = make_real_process_runner();
    ProcessRequest request;
    request.argv = {"/bin/sh", "-c", "exec " + line.substr(key.size()) + " itest-gate lxc pre-start"};
    return runner->run(request).exit_code;
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("the start gate: one pass lets one start through", "[incus][gate]") {
    const test::TempDir temp;
    const auto& dir = temp.path;
    const auto path = start_pass_path((dir / "it's run").string(), "agentctl-tests", "itest-gate");
    CHECK(path == (dir / "it's run" / "start-pass" / "agentctl-tests_itest-gate").string());
    CHECK_THAT(start_pass_path("/run", "", "x"), Catch::EndsWith("/start-pass/default_x"));
    const auto line = start_gate_line(path);
    CHECK(run_hook(line) == 1);  // no pass: refused
    {
        StartPass pass(path);
        CHECK(exists(path));
        CHECK_FALSE(pass.used());
        CHECK(run_hook(line) == 0);  // the pass lets this start through ...
        CHECK(pass.used());          // ... and is used up by it
        CHECK(run_hook(line) == 1);  // the next start has none
    }
    {
        StartPass unused(path);  // a start that failed before the hook ran
    }
    CHECK_FALSE(exists(path));  // leaves no pass behind
}

TEST_CASE("the start gate's line replaces agentctl's earlier one and keeps the rest", "[incus][gate]") {
    const std::string network = "lxc.net.0.ipv4.address = 10.9.0.2/28\nlxc.net.0.ipv4.gateway = 10.9.0.1\n";
    const auto once = with_start_gate(network, "/run/a/start-pass/default_x");
    CHECK(once == network + start_gate_line("/run/a/start-pass/default_x") + "\n");
    const auto again = with_start_gate(once, "/run/b/start-pass/default_x");
    CHECK(again == network + start_gate_line("/run/b/start-pass/default_x") + "\n");
    CHECK(with_start_gate(again, "/run/b/start-pass/default_x") == again);  // idempotent
    // Someone else's hook stays.
    const std::string other = "lxc.hook.pre-start = /usr/local/bin/site-hook\n";
    CHECK(with_start_gate(other, "/p") == other + start_gate_line("/p") + "\n");
}
