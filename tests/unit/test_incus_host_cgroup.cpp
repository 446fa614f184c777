// The cgroup of a sandbox's host processes: where the cgroup hierarchies are
// not there to hold it (as in a shell of `ip netns exec`, which mounts a fresh
// /sys) agentctl refuses, naming the controller and the mount that brings it,
// and creates nothing; removing it takes any process still in it.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "agentctl/error.hpp"
#include "provider/common/proxy_process.hpp"
#include "provider/incus/network/host_cgroup.hpp"
#include "support/temp_dir.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

TEST_CASE("host cgroup: a hierarchy without the memory and pids controllers is refused", "[incus][cgroup]") {
    test::TempDir root;
    const CgroupLimits limits{64u << 20, 16u << 20, 64};
    try {
        (void)prepare_cgroup("itest-cg", limits, root.path.string());
        FAIL("prepare_cgroup accepted a root without cgroup controllers");
    } catch (const Error& error) {
        CHECK_THAT(error.what(), Catch::Contains("the memory cgroup controller is not mounted at " +
                                                 (root.path / "memory").string()));
        CHECK_THAT(error.hint(), Catch::Contains("mount -t cgroup -o memory cgroup " + root.path.string() + "/memory"));
    }
    CHECK(std::filesystem::is_empty(root.path));

    // With memory there but not pids, pids is named.
    std::filesystem::create_directories(root.path / "memory");
    { std::ofstream(root.path / "memory" / "cgroup.procs"); }
    try {
        (void)prepare_cgroup("itest-cg", limits, root.path.string());
        FAIL("prepare_cgroup accepted a root without the pids controller");
    } catch (const Error& error) {
        CHECK_THAT(error.what(), Catch::Contains("the pids cgroup controller is not mounted"));
    }
    CHECK_FALSE(std::filesystem::exists(root.path / "memory" / "agentctl"));
}

TEST_CASE("host cgroup: removing it takes what is still running in it", "[incus][cgroup]") {
    REQUIRE(::geteuid() == 0);  // it makes a real cgroup (the tests run as root)
    const std::string name = "itest-cg-" + std::to_string(::getpid());
    const auto cgroup = prepare_cgroup(name, CgroupLimits{64u << 20, 16u << 20, 64});
    test::TempDir dir;
    provider::common::SpawnOptions options;
    options.output = (dir.path / "out").string();
    options.cgroups = cgroup.procs;
    // A process that outlived the one agentctl stopped (a resolver's child).
    // It runs, so it is in the cgroup, once it has written to the FIFO.
    const auto ready = dir.path / "ready";
    REQUIRE(::mkfifo(ready.c_str(), 0600) == 0);
    const int pid =
        provider::common::spawn_detached({"/bin/sh", "-c", "echo > '" + ready.string() + "'; exec sleep 600"}, options);
    REQUIRE(pid > 0);
    { std::ifstream(ready).get(); }
    for (const auto& procs : cgroup.procs) {
        std::ifstream in(procs);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        CHECK_THAT(text, Catch::Contains(std::to_string(pid)));
    }
    remove_cgroup(name);
    // Gone, or dead and waiting for init to reap it.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    CHECK((line.empty() || line.substr(line.rfind(')') + 2, 1) == "Z"));
    for (const auto& cgroup_dir : cgroup_dirs(name)) CHECK_FALSE(std::filesystem::exists(cgroup_dir));
}
