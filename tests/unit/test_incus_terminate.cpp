// Stopping a sandbox's host process: SIGTERM, SIGKILL after the grace, and an
// answer that says whether it is really gone.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "provider/common/process_identity.hpp"

using namespace agentctl::provider::common;
using namespace std::chrono_literals;

namespace {

// A child that ignores SIGTERM (as a process stuck in its shutdown would)
// and says so through a pipe before it waits for signals.
struct StubbornChild {
    pid_t pid = -1;
    StubbornChild() {
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::signal(SIGTERM, SIG_IGN);
            ::close(ready[0]);
            (void)!::write(ready[1], "r", 1);
            for (;;) ::pause();
        }
        ::close(ready[1]);
        char byte = 0;
        REQUIRE(::read(ready[0], &byte, 1) == 1);
        ::close(ready[0]);
    }
    ~StubbornChild() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
    // True until the child has exited; reaps it then (the caller is its parent).
    bool running() {
        if (pid <= 0) return false;
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) {
            killed_by = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
            pid = -1;
            return false;
        }
        return true;
    }
    // Waits for the child's exit; the signal that ended it.
    int reap() {
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        pid = -1;
        return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    int killed_by = 0;
};

}  // namespace

TEST_CASE("terminate kills a process that outlives SIGTERM's grace, and says it is gone", "[incus][terminate]") {
    StubbornChild child;
    const auto started = std::chrono::steady_clock::now();
    CHECK(terminate(child.pid, 200ms, [&] { return child.running(); }));
    CHECK(child.killed_by == SIGKILL);
    CHECK(std::chrono::steady_clock::now() - started >= 200ms);
}

TEST_CASE("terminate says so when the process is still there after SIGKILL's wait", "[incus][terminate]") {
    StubbornChild child;
    // A process the kernel is slow to tear down: still there however long it waits.
    CHECK_FALSE(terminate(
        child.pid, 50ms, [] { return true; }, 100ms));
    CHECK(child.reap() == SIGKILL);
}
