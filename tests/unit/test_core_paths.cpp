// Where agentctl keeps config, state and runtime files, and the one-time move
// of state from the old layout.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

#include "support/temp_dir.hpp"
#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "core/paths.hpp"

namespace fs = std::filesystem;
using namespace agentctl;

namespace {

core::GetEnv env_of(std::map<std::string, std::string> values) {
    auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(values));
    return [shared](const char* name) -> const char* {
        auto it = shared->find(name);
        return it == shared->end() ? nullptr : it->second.c_str();
    };
}

using agentctl::test::TempDir;

void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("the XDG variables decide the directories; unset or relative ones fall back") {
    auto home_only = env_of({{"HOME", "/home/u"}});
    CHECK(core::config_dir(home_only) == "/home/u/.config/agentctl");
    CHECK(core::state_dir(home_only) == "/home/u/.local/state/agentctl");
    CHECK(core::runtime_dir(home_only) == "/home/u/.local/state/agentctl/run");

    auto xdg = env_of({{"HOME", "/home/u"},
                       {"XDG_CONFIG_HOME", "/c"},
                       {"XDG_STATE_HOME", "/s"},
                       {"XDG_RUNTIME_DIR", "/run/user/1000"}});
    CHECK(core::config_dir(xdg) == "/c/agentctl");
    CHECK(core::state_dir(xdg) == "/s/agentctl");
    CHECK(core::runtime_dir(xdg) == "/run/user/1000/agentctl");

    auto relative = env_of({{"HOME", "/home/u"}, {"XDG_STATE_HOME", "state"}, {"XDG_RUNTIME_DIR", ""}});
    CHECK(core::state_dir(relative) == "/home/u/.local/state/agentctl");
    CHECK(core::runtime_dir(relative) == "/home/u/.local/state/agentctl/run");

    CHECK_THROWS_AS(core::state_dir(env_of({})), Error);
}

TEST_CASE("a private directory is made 0700 and a foreign or non-directory one is refused") {
    TempDir t;
    const auto dir = t.path / "a" / "b";
    core::ensure_private_dir(dir);
    struct stat st {};
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);

    ::chmod(dir.c_str(), 0755);
    core::ensure_private_dir(dir);
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);

    fs::create_symlink(dir, t.path / "link");
    CHECK_THROWS_WITH(core::ensure_private_dir(t.path / "link"), Catch::Contains("is not a directory"));

    if (::geteuid() == 0) {
        const auto foreign = t.path / "foreign";
        fs::create_directories(foreign);
        REQUIRE(::chown(foreign.c_str(), 65534, 65534) == 0);
        CHECK_THROWS_WITH(core::ensure_private_dir(foreign), Catch::Contains("belongs to another user (uid 65534)"));
    }
}

TEST_CASE("old state moves from the config directory to the state directory once") {
    TempDir t;
    const auto old_dir = t.path / "config" / "agentctl";
    const auto state = t.path / "state" / "agentctl";
    write(old_dir / "lima" / "tbox" / "state.json", "{\"name\":\"tbox\"}");
    write(old_dir / "config.yaml", "provider: \"lima\"\n");
    write(old_dir / "locks" / "lima-tbox.lock", "");

    auto moved = core::migrate_state(old_dir, state);
    CHECK(moved == std::vector<std::string>{"lima"});
    CHECK(core::read_file(state / "lima" / "tbox" / "state.json") == "{\"name\":\"tbox\"}");
    CHECK_FALSE(fs::exists(old_dir / "lima"));
    // Configuration and transient locks stay where they are.
    CHECK(fs::exists(old_dir / "config.yaml"));
    CHECK(fs::exists(old_dir / "locks" / "lima-tbox.lock"));
    struct stat st {};
    REQUIRE(::stat(state.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);

    // Idempotent: nothing left to move.
    CHECK(core::migrate_state(old_dir, state).empty());
    CHECK(core::read_file(state / "lima" / "tbox" / "state.json") == "{\"name\":\"tbox\"}");
}

TEST_CASE("migration never overwrites state that is already in the new place") {
    TempDir t;
    const auto old_dir = t.path / "config" / "agentctl";
    const auto state = t.path / "state" / "agentctl";
    write(old_dir / "lima" / "tbox" / "state.json", "old");
    write(state / "lima" / "tbox" / "state.json", "new");
    CHECK(core::migrate_state(old_dir, state).empty());
    CHECK(core::read_file(state / "lima" / "tbox" / "state.json") == "new");
    CHECK(core::read_file(old_dir / "lima" / "tbox" / "state.json") == "old");
}

TEST_CASE("a lock held elsewhere is waited for, after saying so") {
    TempDir t;
    const auto path = t.path / "run" / "locks" / "incus-tbox.lock";
    int first_waits = 0;
    std::optional<core::FileLock> first;
    first.emplace(path, [&] { ++first_waits; });
    CHECK(first_waits == 0);  // free: no message

    // flock locks belong to an open file description, so a second open in
    // this process conflicts exactly as another agentctl's would.
    std::atomic<bool> said{false};
    std::atomic<bool> acquired{false};
    std::thread second([&] {
        core::FileLock lock(path, [&] { said = true; });
        acquired = true;
    });
    for (int i = 0; i < 200 && !said; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(said);
    CHECK_FALSE(acquired);
    first.reset();
    second.join();
    CHECK(acquired);
}
