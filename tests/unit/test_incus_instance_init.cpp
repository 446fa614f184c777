// Recognising a container's init from /proc alone (status's verified init),
// on files laid out as the kernel shows them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "provider/incus/lifecycle/instance_init.hpp"
#include "support/temp_dir.hpp"

using namespace agentctl::provider::incus;

namespace {

void process(const std::filesystem::path& proc, int pid, const std::string& nspid, const std::string& cgroup) {
    const auto dir = proc / std::to_string(pid);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "status") << "Name:\tsystemd\nState:\tS (sleeping)\nNSpid:\t" << nspid << "\nThreads:\t1\n";
    std::ofstream(dir / "cgroup") << cgroup;
}

// /proc/PID/cgroup of an init that systemd inside moved to init.scope (cgroup v1 hybrid).
std::string cgroups_of(const std::string& top) {
    return "9:name=systemd:/" + top + "/init.scope\n8:pids:/" + top + "/init.scope\n3:cpuset:/" + top + "\n0::/" + top +
           "/init.scope\n";
}

}  // namespace

TEST_CASE("container_cgroup is liblxc's name: the project's prefix outside the default project",
          "[incus][instance-init]") {
    CHECK(container_cgroup("agentctl-tests", "web") == "lxc.payload.agentctl-tests_web");
    CHECK(container_cgroup("", "web") == "lxc.payload.web");
    CHECK(container_cgroup("default", "web") == "lxc.payload.web");
}

TEST_CASE("is_container_init: pid 1 of a namespace one level down, in the container's cgroup",
          "[incus][instance-init]") {
    agentctl::test::TempDir dir;
    const auto proc = dir.path.string();
    process(dir.path, 4100, "4100\t1", cgroups_of("lxc.payload.p_web"));
    CHECK(is_container_init(4100, "p", "web", proc));
    SECTION("another container's init") {
        CHECK_FALSE(is_container_init(4100, "p", "we", proc));
        CHECK_FALSE(is_container_init(4100, "p", "web2", proc));
        CHECK_FALSE(is_container_init(4100, "q", "web", proc));
        CHECK_FALSE(is_container_init(4100, "", "web", proc));
    }
    SECTION("a process that is not its namespace's init, or the init of a namespace made inside") {
        process(dir.path, 4101, "4101\t7", cgroups_of("lxc.payload.p_web"));
        process(dir.path, 4102, "4102\t7\t1", cgroups_of("lxc.payload.p_web"));
        CHECK_FALSE(is_container_init(4101, "p", "web", proc));
        CHECK_FALSE(is_container_init(4102, "p", "web", proc));
    }
    SECTION("a host process, a recorded pid that is not the process's, none at all") {
        process(dir.path, 4103, "4103", "0::/init.scope\n");
        process(dir.path, 4104, "4105\t1", cgroups_of("lxc.payload.p_web"));
        CHECK_FALSE(is_container_init(4103, "p", "web", proc));
        CHECK_FALSE(is_container_init(4104, "p", "web", proc));
        CHECK_FALSE(is_container_init(4199, "p", "web", proc));
        CHECK_FALSE(is_container_init(0, "p", "web", proc));
        CHECK_FALSE(is_container_init(1, "p", "web", proc));
    }
}
