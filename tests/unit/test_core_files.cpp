// Atomic writes and the per-sandbox lock, on real files and real processes.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "support/temp_dir.hpp"

using namespace agentctl;
namespace fs = std::filesystem;

using agentctl::test::TempDir;

TEST_CASE("write_file_atomic creates parents, sets the mode, replaces content and leaves no temp file") {
    TempDir dir;
    const auto file = dir.path / "a/b/state.json";
    core::write_file_atomic(file, "one", 0600);
    CHECK(core::read_file(file) == "one");
    struct stat info {};
    REQUIRE(::stat(file.c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0600);
    core::write_file_atomic(file, "two", 0644);
    CHECK(core::read_file(file) == "two");
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(file.parent_path())) ++entries;
    CHECK(entries == 1);
}

TEST_CASE("a failed atomic write leaves the old file intact") {
    TempDir dir;
    const auto file = dir.path / "state.json";
    core::write_file_atomic(file, "old");
    fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
    if (::geteuid() != 0) {  // root ignores directory permissions
        CHECK_THROWS_AS(core::write_file_atomic(file, "new"), Error);
        CHECK(core::read_file(file) == "old");
    }
    fs::permissions(dir.path, fs::perms::owner_all);
}

TEST_CASE("read_file_if_exists tells a missing file from an empty one") {
    TempDir dir;
    CHECK_FALSE(core::read_file_if_exists(dir.path / "missing"));
    core::write_file_atomic(dir.path / "empty", "");
    CHECK(core::read_file_if_exists(dir.path / "empty") == std::string());
    CHECK_THROWS_WITH(core::read_file(dir.path / "missing"),
                      "cannot read " + (dir.path / "missing").string() + ": No such file or directory");
}

TEST_CASE("FileLock serialises two processes") {
    TempDir dir;
    const auto lock_path = dir.path / "locks/incus-tbox.lock";
    const auto log = dir.path / "log";
    auto append = [&](const char* text) {
        auto content = core::read_file_if_exists(log).value_or("");
        core::write_file_atomic(log, content + text);
    };
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::usleep(100 * 1000);  // let the parent take the lock first
        {
            core::FileLock lock(lock_path);
            append("child\n");
        }
        ::_exit(0);
    }
    {
        core::FileLock lock(lock_path);
        append("parent-start\n");
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        append("parent-end\n");
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(core::read_file(log) == "parent-start\nparent-end\nchild\n");
}

TEST_CASE("FileLock::try_acquire takes a free lock and never waits for a held one") {
    TempDir dir;
    const auto lock_path = dir.path / "locks/incus-tbox.lock";
    // Without create, a lock file nobody made is free, and stays unmade.
    auto unmade = core::FileLock::try_acquire(lock_path, false);
    REQUIRE(unmade != nullptr);
    CHECK_FALSE(unmade->held());
    CHECK_FALSE(std::filesystem::exists(lock_path));
    core::FileLock held(lock_path);
    // flock is per open file: another open of the same file is another holder.
    CHECK(core::FileLock::try_acquire(lock_path) == nullptr);
    CHECK(core::FileLock::try_acquire(lock_path, false) == nullptr);
}

TEST_CASE("FileLock::try_acquire holds the lock it took") {
    TempDir dir;
    const auto lock_path = dir.path / "gc.lock";
    auto lock = core::FileLock::try_acquire(lock_path);
    REQUIRE(lock != nullptr);
    CHECK(lock->held());
    CHECK(core::FileLock::try_acquire(lock_path) == nullptr);
    lock.reset();
    CHECK(core::FileLock::try_acquire(lock_path) != nullptr);
}
