// Dry-run mount resolution (--preview, and the check before the capability
// gate): the same checks and the same resulting paths, nothing created.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "agentctl/error.hpp"
#include "policy/mounts.hpp"

using namespace agentctl;
using namespace agentctl::policy;
namespace fs = std::filesystem;

namespace {

struct TempHome {
    fs::path root;
    std::string home;
    TempHome() {
        std::string templ = (fs::temp_directory_path() / "agentctl-dryrun-XXXXXX").string();
        root = fs::canonical(::mkdtemp(templ.data()));
        home = (root / "home/u").string();
        fs::create_directories(fs::path(home) / ".ssh");
        fs::create_directories(fs::path(home) / "agentctl/workspaces");
    }
    ~TempHome() { fs::remove_all(root); }

    MountContext context(bool create) const {
        MountPolicy policy;
        policy.create_missing = true;
        return MountContext{"box1", home, home, home + "/.config/agentctl", policy, create, {}};
    }
};

}  // namespace

TEST_CASE("a dry run resolves a missing createMissing directory without creating it") {
    TempHome t;
    const std::vector<MountRequest> requests = {{"~/agentctl/workspaces/{{.Name}}", "/workspace", true, "profile"}};
    const auto dry = resolve_mounts(requests, t.context(false));
    REQUIRE(dry.size() == 1);
    CHECK(dry[0].host_path == t.home + "/agentctl/workspaces/box1");
    CHECK(!fs::exists(t.home + "/agentctl/workspaces/box1"));

    const auto real = resolve_mounts(requests, t.context(true));
    CHECK(real == dry);
    CHECK(fs::is_directory(t.home + "/agentctl/workspaces/box1"));
}

TEST_CASE("a dry run still refuses what the real run refuses, and creates nothing") {
    TempHome t;
    fs::create_symlink(t.home + "/.ssh", t.home + "/agentctl/workspaces/link");
    const std::vector<MountRequest> requests = {{"~/agentctl/workspaces/link/new", "/w", false, "--mount"}};
    CHECK_THROWS_AS(resolve_mounts(requests, t.context(false)), Error);
    CHECK(!fs::exists(t.home + "/.ssh/new"));
}
