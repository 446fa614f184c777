// The cgroup of a sandbox's host processes, where the cgroup hierarchies are
// not there to hold it (as in a shell of `ip netns exec`, which mounts a fresh
// /sys): agentctl refuses, naming the controller and the mount that brings it,
// and creates nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "agentctl/error.hpp"
#include "provider/incus/host_cgroup.hpp"
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
