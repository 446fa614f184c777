// A detached process (a sandbox's egress proxy or resolver) starts with
// stdin, stdout and stderr only: a descriptor the starting command holds (a
// lock, a socket), even one without close-on-exec, does not live on in it.
// What the caller hands it (SpawnOptions::input) is its stdin.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "agentctl/process.hpp"
#include "provider/common/proxy_process.hpp"
#include "support/temp_dir.hpp"

using namespace agentctl;
using namespace agentctl::provider::common;

TEST_CASE("spawn_detached: the child holds none of the caller's descriptors", "[incus][spawn]") {
    test::TempDir dir;
    const auto lock_path = (dir.path / "lock").string();
    const auto listing = dir.path / "fds";
    // Inherited by fork+exec unless something closes it: no O_CLOEXEC.
    const int held = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0600);
    REQUIRE(held >= 3);
    REQUIRE(::flock(held, LOCK_EX) == 0);

    SpawnOptions options;
    options.output = (dir.path / "out").string();
    REQUIRE(::mkfifo(listing.c_str(), 0600) == 0);
    const auto script = "ls /proc/self/fd > '" + listing.string() + "'; exec sleep 30";
    const int pid = spawn_detached({"/bin/sh", "-c", script}, options);
    REQUIRE(pid > 0);
    struct Kill {
        int pid;
        ~Kill() { ::kill(pid, SIGKILL); }
    } kill_it{pid};
    // Opening the FIFO waits for the child to write its listing into it.
    std::ifstream in(listing);
    std::vector<int> fds;
    for (int fd; in >> fd;) fds.push_back(fd);
    // 0, 1, 2 and the directory `ls` reads the listing from.
    CHECK(fds.size() == 4);
    CHECK(fds[0] == 0);
    CHECK(fds[1] == 1);
    CHECK(fds[2] == 2);

    // The lock is the caller's alone: once it lets go, another taker gets it
    // while the detached child still runs.
    ::close(held);
    const int other = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
    CHECK(::flock(other, LOCK_EX | LOCK_NB) == 0);
    ::close(other);
}

TEST_CASE("spawn_detached: the input is the child's stdin, and no other descriptor is left", "[incus][spawn]") {
    test::TempDir dir;
    const auto listing = dir.path / "fds";
    const auto received = dir.path / "received";
    SpawnOptions options;
    options.output = (dir.path / "out").string();
    options.input = "{\"secrets\": []}\nsecond line";
    REQUIRE(::mkfifo(listing.c_str(), 0600) == 0);
    // `cat` ends only at the end of its stdin: the pipe's write end is closed.
    const auto script = "cat > '" + received.string() + "'; ls /proc/self/fd > '" + listing.string() + "'";
    REQUIRE(spawn_detached({"/bin/sh", "-c", script}, options) > 0);
    std::ifstream in(listing);
    std::vector<int> fds;
    for (int fd; in >> fd;) fds.push_back(fd);
    CHECK(fds == std::vector<int>{0, 1, 2, 3});  // 3: the directory `ls` reads
    std::ifstream got(received);
    CHECK(std::string(std::istreambuf_iterator<char>(got), {}) == options.input);

    // More than a pipe holds is refused before anything starts.
    options.input.assign(65537, 'x');
    CHECK_THROWS_WITH(spawn_detached({"/bin/sh", "-c", "touch '" + received.string() + ".started'"}, options),
                      Catch::Contains("do not fit a pipe"));
    CHECK_FALSE(std::filesystem::exists(received.string() + ".started"));
}
