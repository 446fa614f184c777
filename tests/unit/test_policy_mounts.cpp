// Mount resolution against real directories and real symlinks in a temp dir.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "agentctl/error.hpp"
#include "policy/mounts.hpp"
#include "support/error_text.hpp"

using namespace agentctl;
using namespace agentctl::policy;
namespace fs = std::filesystem;

namespace {

struct Home {
    fs::path root;
    std::string home;
    Home() {
        std::string templ = (fs::temp_directory_path() / "agentctl-mounts-XXXXXX").string();
        root = fs::canonical(::mkdtemp(templ.data()));
        home = (root / "home/u").string();
        for (const char* dir : {".ssh", ".aws", ".config/agentctl", ".config/other", "work/app", "agentctl/workspaces",
                                "notes", "secrets/ssh-real"}) {
            fs::create_directories(fs::path(home) / dir);
        }
        fs::create_directories(root / "data/set1");
    }
    ~Home() { fs::remove_all(root); }

    MountContext context(MountPolicy policy = {}) const {
        return MountContext{"box1", home, home, home + "/.config/agentctl", std::move(policy), true, {}};
    }
};

MountRequest request(std::string host, std::string guest = {}, bool writable = false) {
    return MountRequest{std::move(host), std::move(guest), writable, "--mount"};
}

std::string error_of(const std::vector<MountRequest>& requests, const MountContext& context) {
    return test::error_of([&] { (void)resolve_mounts(requests, context); });
}

}  // namespace

TEST_CASE("a workspace with {{.Name}} is created when createMissing is set", "[mounts]") {
    Home h;
    MountPolicy policy;
    policy.create_missing = true;
    auto mounts = resolve_mounts({request("~/agentctl/workspaces/{{.Name}}", "/workspace", true)}, h.context(policy));
    REQUIRE(mounts.size() == 1);
    CHECK(mounts[0].host_path == h.home + "/agentctl/workspaces/box1");
    CHECK(mounts[0].guest_path == "/workspace");
    CHECK(mounts[0].writable);
    CHECK(mounts[0].origin == "--mount");
    CHECK(fs::is_directory(h.home + "/agentctl/workspaces/box1"));
}

TEST_CASE("a missing directory without createMissing is refused", "[mounts]") {
    Home h;
    CHECK(error_of({request("~/missing")}, h.context()) ==
          "a mount was refused:\n  mount ~/missing (--mount): " + h.home +
              "/missing does not exist (create it, or set mountPolicy.createMissing)");
    CHECK_FALSE(fs::exists(h.home + "/missing"));
}

TEST_CASE("the guest path defaults to the host path; relative host paths are from the working directory", "[mounts]") {
    Home h;
    auto mounts = resolve_mounts({request("work/app")}, h.context());
    REQUIRE(mounts.size() == 1);
    CHECK(mounts[0].host_path == h.home + "/work/app");
    CHECK(mounts[0].guest_path == h.home + "/work/app");
    CHECK_FALSE(mounts[0].writable);
}

TEST_CASE("denied directories: is, inside, or contains", "[mounts][deny]") {
    Home h;
    auto ctx = h.context();
    CHECK(error_of({request("~/.ssh")}, ctx) == "a mount was refused:\n  mount ~/.ssh (--mount): " + h.home +
                                                    "/.ssh is refused (credentials or backend state)");
    fs::create_directories(h.home + "/.aws/sub");
    CHECK(error_of({request("~/.aws/sub")}, ctx) == "a mount was refused:\n  mount ~/.aws/sub (--mount): " + h.home +
                                                        "/.aws is refused (credentials or backend state)");
    CHECK(error_of({request("~/.config")}, ctx) ==
          "a mount was refused:\n  mount ~/.config (--mount): it contains " + h.home +
              "/.config/gcloud, which is refused (credentials or backend state)");
    CHECK(error_of({request("~")}, ctx) ==
          "a mount was refused:\n  mount ~ (--mount): $HOME itself cannot be mounted "
          "(mountPolicy.allowHome is not set); mount a directory below it");
    CHECK(error_of({request("/")}, ctx) ==
          "a mount was refused:\n  mount / (--mount): the root directory / cannot be mounted");
    CHECK(error_of({request(h.root.string())}, ctx) == "a mount was refused:\n  mount " + h.root.string() +
                                                           " (--mount): it contains " + h.home +
                                                           "/.ssh, which is refused (credentials or backend state)");
    // agentctl's own configuration and state
    CHECK(error_of({request("~/.config/agentctl")}, ctx).find("/.config/agentctl is refused") != std::string::npos);
    // allowHome lifts the $HOME check, but $HOME still contains the deny list
    MountPolicy policy;
    policy.allow_home = true;
    CHECK(error_of({request("~")}, h.context(policy)) == "a mount was refused:\n  mount ~ (--mount): it contains " +
                                                             h.home +
                                                             "/.ssh, which is refused (credentials or backend state)");
}

TEST_CASE("agentctl's state and runtime directories are denied wherever XDG puts them", "[mounts][deny]") {
    auto denied =
        builtin_denied_paths("/home/u", "/home/u/.config/agentctl", {"/srv/state/agentctl", "/run/user/7/agentctl"});
    for (const char* path :
         {"/home/u/.config/agentctl", "/home/u/.local/state/agentctl", "/srv/state/agentctl", "/run/user/7/agentctl"}) {
        INFO(path);
        CHECK(std::find(denied.begin(), denied.end(), path) != denied.end());
    }
}

TEST_CASE("Incus's state directories are denied", "[mounts][deny]") {
    auto denied = builtin_denied_paths("/home/u", "/home/u/.config/agentctl");
    for (const char* path :
         {"/var/lib/incus", "/var/cache/incus", "/var/log/incus", "/run/incus", "/home/u/.ssh", "/home/u/.gnupg",
          "/home/u/.aws", "/home/u/.config/gcloud", "/home/u/.kube", "/home/u/.docker", "/home/u/.lima",
          "/home/u/.local/share/incus", "/home/u/.config/incus", "/home/u/.config/agentctl"}) {
        INFO(path);
        CHECK(std::find(denied.begin(), denied.end(), path) != denied.end());
    }
    Home h;
    CHECK(error_of({request("/var/lib")}, h.context()) ==
          "a mount was refused:\n  mount /var/lib (--mount): it contains /var/lib/incus, which is refused (credentials "
          "or "
          "backend state)");
}

TEST_CASE("a symlink inside an allowed root pointing at ~/.ssh is refused", "[mounts][symlink]") {
    Home h;
    fs::create_directory_symlink(h.home + "/.ssh", h.home + "/work/app/keys");
    MountPolicy policy;
    policy.allowed_roots = std::vector<std::string>{h.home + "/work"};
    CHECK(error_of({request("~/work/app/keys")}, h.context(policy)) ==
          "a mount was refused:\n  mount ~/work/app/keys (--mount): " + h.home +
              "/.ssh is refused (credentials or backend state)");
}

TEST_CASE("a symlinked parent is resolved before the checks", "[mounts][symlink]") {
    Home h;
    fs::create_directory_symlink(h.home, h.home + "/work/up");  // ~/work/up -> ~
    MountPolicy policy;
    policy.allowed_roots = std::vector<std::string>{h.home + "/work"};
    CHECK(error_of({request("~/work/up/.aws")}, h.context(policy)) ==
          "a mount was refused:\n  mount ~/work/up/.aws (--mount): " + h.home +
              "/.aws is refused (credentials or backend state)");
    // and a parent symlink that leaves the allowed root
    CHECK(error_of({request("~/work/up/notes")}, h.context(policy)) ==
          "a mount was refused:\n  mount ~/work/up/notes (--mount): it is not under an allowed root "
          "(mountPolicy.allowedRoots: " +
              h.home + "/work)");
    // a symlink to a directory that does not exist yet, into a denied one, with createMissing
    fs::create_directory_symlink(h.home + "/.ssh/new", h.home + "/work/later");
    policy.create_missing = true;
    CHECK(error_of({request("~/work/later")}, h.context(policy)) ==
          "a mount was refused:\n  mount ~/work/later (--mount): " + h.home +
              "/.ssh is refused (credentials or backend state)");
    CHECK_FALSE(fs::exists(h.home + "/.ssh/new"));
}

TEST_CASE("a denied directory reached through its own symlink target is refused", "[mounts][symlink]") {
    Home h;
    fs::remove(h.home + "/.ssh");
    fs::create_directory_symlink(h.home + "/secrets/ssh-real", h.home + "/.ssh");  // ~/.ssh -> ~/secrets/ssh-real
    CHECK(error_of({request("~/secrets/ssh-real")}, h.context()) ==
          "a mount was refused:\n  mount ~/secrets/ssh-real (--mount): " + h.home +
              "/secrets/ssh-real is refused (credentials or backend state)");
    CHECK(error_of({request("~/secrets")}, h.context()) ==
          "a mount was refused:\n  mount ~/secrets (--mount): it contains " + h.home +
              "/secrets/ssh-real, which is refused (credentials or backend state)");
}

TEST_CASE("'..' cannot climb out of a check", "[mounts][symlink]") {
    Home h;
    MountPolicy policy;
    policy.allowed_roots = std::vector<std::string>{h.home + "/work"};
    CHECK(error_of({request("~/work/../.ssh")}, h.context(policy)) ==
          "a mount was refused:\n  mount ~/work/../.ssh (--mount): " + h.home +
              "/.ssh is refused (credentials or backend state)");
    CHECK(error_of({request("~/work/app/../../notes")}, h.context(policy)) ==
          "a mount was refused:\n  mount ~/work/app/../../notes (--mount): it is not under an allowed root "
          "(mountPolicy.allowedRoots: " +
              h.home + "/work)");
    CHECK(resolve_mounts({request("~/work/app/../app")}, h.context(policy))[0].host_path == h.home + "/work/app");
}

TEST_CASE("allowed roots match by whole path segment", "[mounts][roots]") {
    Home h;
    fs::create_directories(h.home + "/wo");
    MountPolicy policy;
    policy.allowed_roots = std::vector<std::string>{h.home + "/wo"};
    CHECK(
        error_of({request("~/work")}, h.context(policy)) ==
        "a mount was refused:\n  mount ~/work (--mount): it is not under an allowed root (mountPolicy.allowedRoots: " +
            h.home + "/wo)");
    CHECK(resolve_mounts({request("~/wo")}, h.context(policy)).size() == 1);
    policy.allowed_roots = std::vector<std::string>{};
    CHECK(error_of({request("~/work")}, h.context(policy)) ==
          "a mount was refused:\n  mount ~/work (--mount): it is not under an allowed root (mountPolicy.allowedRoots: "
          "none)");
}

TEST_CASE("denyPaths refuse what is, is inside, or contains them", "[mounts][deny]") {
    Home h;
    MountPolicy policy;
    policy.deny_paths = {h.home + "/work/app"};
    CHECK(error_of({request("~/work")}, h.context(policy)) ==
          "a mount was refused:\n  mount ~/work (--mount): it contains " + h.home +
              "/work/app, which is refused (listed in "
              "mountPolicy.denyPaths)");
    CHECK(error_of({request("~/work/app")}, h.context(policy)) ==
          "a mount was refused:\n  mount ~/work/app (--mount): " + h.home +
              "/work/app is refused (listed in mountPolicy.denyPaths)");
    CHECK(resolve_mounts({request("~/notes")}, h.context(policy)).size() == 1);
}

TEST_CASE("guest system directories are refused exactly, not below", "[mounts][guest]") {
    Home h;
    for (const char* guest : {"/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/boot", "/dev", "/proc", "/sys", "/var",
                              "/root", "/etc/", "/usr/../etc"}) {
        INFO(guest);
        CHECK(error_of({request("~/notes", guest)}, h.context()).find("is a system directory of the guest") !=
              std::string::npos);
    }
    CHECK(resolve_mounts({request("~/notes", "/etc/notes")}, h.context())[0].guest_path == "/etc/notes");
    CHECK(error_of({request("~/notes", "notes")}, h.context()) ==
          "a mount was refused:\n  mount ~/notes (--mount): the guest path \"notes\" is not absolute");
}

TEST_CASE("overlapping host or guest paths are refused", "[mounts][overlap]") {
    Home h;
    CHECK(error_of({request("~/work", "/a"), request("~/work/app", "/b")}, h.context()) ==
          "a mount was refused:\n  mounts " + h.home + "/work (--mount) and " + h.home +
              "/work/app (--mount) overlap on the host");
    CHECK(error_of({request("~/work", "/w"), request("~/notes", "/w/n")}, h.context()) ==
          "a mount was refused:\n  mounts /w (--mount) and /w/n (--mount) overlap in the guest");
    fs::create_directory_symlink(h.home + "/work", h.home + "/notes/w");
    CHECK(error_of({request("~/work", "/a"), request("~/notes/w", "/b")}, h.context()) ==
          "a mount was refused:\n  mounts " + h.home + "/work (--mount) and " + h.home +
              "/work (--mount) overlap on the host");
}

TEST_CASE("every problem is reported and nothing is created when any mount fails", "[mounts]") {
    Home h;
    MountPolicy policy;
    policy.create_missing = true;
    auto text =
        error_of({request("~/fresh", "/fresh"), request("~/.ssh", "/s"), request("~/x", "/etc")}, h.context(policy));
    CHECK(text ==
          "2 mounts were refused:\n  mount ~/.ssh (--mount): " + h.home +
              "/.ssh is refused (credentials or backend state)\n  mount ~/x (--mount): the guest path /etc is a "
              "system directory of the guest");
    CHECK_FALSE(fs::exists(h.home + "/fresh"));
}

TEST_CASE("a sandbox name that is not a path segment cannot be put into a path", "[mounts]") {
    Home h;
    MountPolicy policy;
    policy.create_missing = true;
    auto ctx = h.context(policy);
    ctx.name = "../../.ssh";
    CHECK(error_of({request("~/agentctl/workspaces/{{.Name}}")}, ctx) ==
          "a mount was refused:\n  mount ~/agentctl/workspaces/{{.Name}} (--mount): the sandbox name \"../../.ssh\" "
          "cannot "
          "be put into a path");
}

TEST_CASE("mount flag forms", "[mounts][flags]") {
    auto m = parse_mount_flag("~/src");
    CHECK(m.host_path == "~/src");
    CHECK(m.guest_path.empty());
    CHECK_FALSE(m.writable);
    m = parse_mount_flag("~/src:/src:w");
    CHECK(m.guest_path == "/src");
    CHECK(m.writable);
    m = parse_mount_flag("~/src:ro");
    CHECK(m.guest_path.empty());
    CHECK_FALSE(m.writable);
    m = parse_mount_flag("~/src:w");
    CHECK(m.writable);
    CHECK_THROWS_WITH(parse_mount_flag("~/src:rel"),
                      "invalid --mount \"~/src:rel\": the guest path \"rel\" is not absolute");
    CHECK_THROWS_WITH(parse_mount_flag(":/x"), "invalid --mount \":/x\": the host path is empty");
    CHECK_THROWS_WITH(parse_mount_flag("a:/b:/c:w"),
                      "invalid --mount \"a:/b:/c:w\": too many ':' (host paths containing ':' are not supported)");
}

TEST_CASE("recorded mounts are checked again: a directory swapped for a symlink is refused", "[mounts][recheck]") {
    Home h;
    auto mounts = resolve_mounts({request(h.home + "/work/app", "/project", true)}, h.context());
    REQUIRE(mounts.size() == 1);
    CHECK_NOTHROW(recheck_mounts(mounts, h.context()));
    // What a sandbox with the parent directory writable can do between two starts.
    fs::remove_all(h.home + "/work/app");
    fs::create_directory_symlink(h.home + "/.ssh", h.home + "/work/app");
    try {
        recheck_mounts(mounts, h.context());
        FAIL("the swapped mount was accepted");
    } catch (const Error& error) {
        const std::string text = error.what();
        CHECK_THAT(text,
                   Catch::Contains("the recorded path " + h.home + "/work/app now resolves to " + h.home + "/.ssh"));
        CHECK_THAT(error.hint(), Catch::Contains("nothing was started"));
    }
    // The same link to an allowed directory is still a different directory: refused.
    fs::remove(h.home + "/work/app");
    fs::create_directory_symlink(h.home + "/notes", h.home + "/work/app");
    CHECK_THROWS_WITH(recheck_mounts(mounts, h.context()), Catch::Contains("now resolves to " + h.home + "/notes"));
    // Gone altogether.
    fs::remove(h.home + "/work/app");
    CHECK_THROWS_WITH(recheck_mounts(mounts, h.context()), Catch::Contains("is no longer a directory"));
}

TEST_CASE("recorded mounts are checked again with the same rules as create", "[mounts][recheck]") {
    Home h;
    // A record that today's rules refuse (e.g. the policy tightened since create).
    std::vector<Mount> recorded{{h.home + "/notes", "/notes", true, "--mount"}};
    MountPolicy policy;
    policy.deny_paths = {h.home + "/notes"};
    CHECK_NOTHROW(recheck_mounts(recorded, h.context()));
    CHECK_THROWS_WITH(recheck_mounts(recorded, h.context(policy)), Catch::Contains("listed in mountPolicy.denyPaths"));
    std::vector<Mount> ssh{{h.home + "/.ssh", "/k", false, "--mount"}};
    CHECK_THROWS_WITH(recheck_mounts(ssh, h.context()), Catch::Contains("credentials or backend state"));
}
