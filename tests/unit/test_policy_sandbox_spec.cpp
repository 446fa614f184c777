// compute_sandbox_spec(): profiles, --spec and flags into one effective spec,
// with real profile files, allow files and directories in a temp dir.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "policy/sandbox_spec.hpp"
#include "support/error_text.hpp"

using namespace agentctl;
using namespace agentctl::policy;
namespace fs = std::filesystem;

namespace {

struct Tree {
    fs::path root;
    SpecInputs in;
    Tree() {
        std::string templ = (fs::temp_directory_path() / "agentctl-spec-XXXXXX").string();
        root = fs::canonical(::mkdtemp(templ.data()));
        auto& env = in.env;
        env.home = (root / "home").string();
        env.cwd = (root / "project").string();
        env.project_dir = env.cwd + "/.agentctl/profiles";
        env.config_dir = env.home + "/.config/agentctl";
        env.user_dir = env.config_dir + "/profiles";
        env.org_dir = (root / "org").string();
        for (const auto& dir : {env.project_dir, env.user_dir, env.org_dir, env.home + "/.ssh", env.home + "/src"}) {
            fs::create_directories(dir);
        }
        in.name = "box";
    }
    ~Tree() { fs::remove_all(root); }
    void profile(const std::string& dir, const std::string& name, const std::string& spec) {
        std::ofstream(dir + "/" + name + ".yaml") << "apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n" << spec;
    }
};

std::vector<std::string> entries_with_origin(const NetworkPolicy& policy) {
    std::vector<std::string> out;
    for (const auto& rule : policy.allow) out.push_back(rule.entry() + " <- " + rule.origin);
    return out;
}

std::string error_of(const SpecInputs& in) {
    return test::error_of([&] { (void)compute_sandbox_spec(in); });
}

}  // namespace

TEST_CASE("the default profile alone gives the reference defaults", "[spec]") {
    Tree t;
    auto spec = compute_sandbox_spec(t.in);
    CHECK(spec.name == "box");
    CHECK(spec.profiles == std::vector<std::string>{"default"});
    CHECK(spec.network.enabled);
    CHECK(spec.network.deny_lan);
    CHECK_FALSE(spec.network.allow_lan);
    CHECK(spec.network.allow.empty());
    CHECK(spec.resources.cpu_cores == 2);
    CHECK(spec.resources.memory_bytes == 4ULL << 30);
    CHECK(spec.resources.processes == 2048);
    REQUIRE(spec.mounts.size() == 1);
    CHECK(spec.mounts[0].host_path == t.in.env.home + "/agentctl/workspaces/box");
    CHECK(spec.mounts[0].guest_path == "/workspace");
    CHECK(spec.mounts[0].writable);
    CHECK(spec.mounts[0].origin == "profile default (built-in:default:15)");
    CHECK(fs::is_directory(t.in.env.home + "/agentctl/workspaces/box"));
    CHECK(spec.isolation == Isolation::Vm);
    CHECK(spec.user == "agent");
}

TEST_CASE("the sandbox user is named after --agent", "[spec][agent]") {
    Tree t;
    t.in.agent = "claude";
    auto spec = compute_sandbox_spec(t.in);
    CHECK(spec.agent == "claude");
    CHECK(spec.user == "claude");
}

TEST_CASE("every allow source carries its origin", "[spec][origins]") {
    Tree t;
    std::ofstream(t.in.env.cwd + "/hosts.txt") << "# extra\n\nextra.example.com:8443\n";
    t.profile(t.in.env.user_dir, "mine", "  network:\n    allow:\n      - domain: mine.example.com\n");
    t.in.profiles = {"default", "mine"};
    t.in.allow = {"cli.example.com:443"};
    t.in.allow_files = {"hosts.txt"};
    t.in.allow_presets = {"gitlab"};
    t.in.agent = "cursor";
    auto policy = compute_network_policy(t.in);
    CHECK(entries_with_origin(policy) ==
          std::vector<std::string>{"mine.example.com <- profile mine (" + t.in.env.user_dir + "/mine.yaml:6)",
                                   "cli.example.com:443 <- --allow",
                                   "extra.example.com:8443 <- allow file " + t.in.env.cwd + "/hosts.txt:3",
                                   "gitlab.com:443 <- preset gitlab", "cursor.com:443 <- agent cursor",
                                   "api2.cursor.sh:443 <- agent cursor"});
}

TEST_CASE("LAN flags: only --allow-lan opens the LAN, and the two flags conflict", "[spec][lan]") {
    Tree t;
    t.profile(t.in.env.user_dir, "open", "  network:\n    denyLAN: false\n");
    t.in.profiles = {"default", "open"};
    CHECK(compute_network_policy(t.in).deny_lan);  // the default profile said true; a later layer cannot undo it
    t.in.profiles = {"open"};
    auto policy = compute_network_policy(t.in);
    CHECK_FALSE(policy.deny_lan);
    CHECK_FALSE(policy.allow_lan);
    t.in.profiles = {"default"};
    t.in.allow_lan = true;
    policy = compute_network_policy(t.in);
    CHECK(policy.allow_lan);
    CHECK_FALSE(policy.deny_lan);
    t.in.deny_lan = true;
    CHECK_THROWS_WITH(compute_network_policy(t.in), "--allow-lan and --deny-lan contradict each other; give one");
    t.in.allow_lan = false;
    t.in.no_network_policy = true;
    CHECK_FALSE(compute_network_policy(t.in).enabled);
}

TEST_CASE("flags override resources; ports, packages and isolation are applied", "[spec][flags]") {
    Tree t;
    t.in.cpu_cores = "6";
    t.in.memory = "12GiB";
    t.in.disk_size = "64GB";
    t.in.ports = {"8080:80", "127.0.0.1:5353:53/udp"};
    t.in.packages = {"git", "shellcheck", "git"};
    t.in.isolation = "container";
    auto spec = compute_sandbox_spec(t.in);
    CHECK(spec.resources.cpu_cores == 6);
    CHECK(spec.resources.memory_bytes == 12ULL << 30);
    CHECK(spec.resources.disk_bytes == 64000000000ULL);
    REQUIRE(spec.ports.size() == 2);
    CHECK(spec.ports[1] == PortForward{"127.0.0.1", 5353, 53, "udp"});
    CHECK(spec.packages == std::vector<std::string>{"git", "shellcheck"});
    CHECK(spec.isolation == Isolation::Container);
}

TEST_CASE("an organisation's isolation: vm refuses --isolation container", "[spec][flags]") {
    Tree t;
    t.profile(t.in.env.org_dir, "default", "  isolation: vm\n");
    t.in.isolation = "container";
    CHECK(error_of(t.in) == "--isolation container conflicts with isolation: vm set by profile default (" +
                                t.in.env.org_dir + "/default.yaml:4)");
}

TEST_CASE("every bad flag is reported at once and nothing is created", "[spec][errors]") {
    Tree t;
    t.in.allow = {"https://x.example.com/path", "ok.example.com"};
    t.in.allow_presets = {"nosuch"};
    t.in.ports = {"80"};
    t.in.cpu_cores = "many";
    t.in.memory = "4G";
    t.in.packages = {"bad;name"};
    t.in.isolation = "jail";
    t.in.agent = "nobody";
    t.in.allow_files = {"missing.txt"};
    CHECK(error_of(t.in) ==
          "9 problems with this sandbox's settings:\n"
          "  invalid allow entry \"https://x.example.com/path\": a URL with a path, query or fragment cannot be "
          "enforced: "
          "filtering is by host and port only\n"
          "  allow file " +
              t.in.env.cwd +
              "/missing.txt does not exist\n"
              "  unknown allow preset \"nosuch\"\n"
              "  invalid --port \"80\": it needs HOST_PORT:GUEST_PORT\n"
              "  invalid --cpu-cores \"many\": a whole number from 1 to 1024\n"
              "  invalid --memory \"4G\": a size above 0 such as 4GiB, 512MiB or 20GB; did you mean 4GiB?\n"
              "  invalid package name \"bad;name\": a package name is a letter or digit followed by letters, digits, "
              "'.', '_', "
              "'+' or '-' (at most 128 characters)\n"
              "  invalid --isolation \"jail\": vm or container\n"
              "  unknown agent \"nobody\"");
    CHECK_FALSE(fs::exists(t.in.env.home + "/agentctl/workspaces/box"));
}

TEST_CASE("a --spec file names the image, the profiles and overrides", "[spec][file]") {
    Tree t;
    std::ofstream(t.in.env.cwd + "/sandbox.yaml") << R"(apiVersion: agentctl.dev/v1
kind: Spec
spec:
  image: images:debian/12
  profiles: [strict]
  overrides:
    network:
      allowPresets: [pypi]
    resources:
      cpuCores: 2
)";
    t.in.spec_file = "sandbox.yaml";
    auto spec = compute_sandbox_spec(t.in);
    CHECK(spec.image == "images:debian/12");
    CHECK(spec.profiles == std::vector<std::string>{"strict"});
    CHECK(spec.resources.cpu_cores == 2);
    CHECK(spec.resources.memory_bytes == 2ULL << 30);
    CHECK(entries_with_origin(spec.network) ==
          std::vector<std::string>{"pypi.org:443 <- preset pypi", "files.pythonhosted.org:443 <- preset pypi"});
    t.in.profiles = {"default"};
    CHECK(error_of(t.in) == "--spec cannot be combined with --image or --profile: the spec file names both");
}

TEST_CASE("mount flags: none > only > additive, writable last", "[spec][mounts]") {
    Tree t;
    fs::create_directories(t.in.env.home + "/src/app");
    t.in.mount_flags.mounts = {"~/src/app:/app"};
    auto spec = compute_sandbox_spec(t.in);
    REQUIRE(spec.mounts.size() == 2);
    CHECK(spec.mounts[0].guest_path == "/workspace");
    CHECK(spec.mounts[1].host_path == t.in.env.home + "/src/app");
    CHECK_FALSE(spec.mounts[1].writable);
    t.in.mount_flags.only = true;
    spec = compute_sandbox_spec(t.in);
    REQUIRE(spec.mounts.size() == 1);
    CHECK(spec.mounts[0].guest_path == "/app");
    t.in.mount_flags.writable = true;
    spec = compute_sandbox_spec(t.in);
    CHECK(spec.mounts[0].writable);
    t.in.mount_flags.none = true;
    CHECK(compute_sandbox_spec(t.in).mounts.empty());
}

TEST_CASE("the strict profile's allowedRoots bind --mount", "[spec][mounts]") {
    Tree t;
    t.in.profiles = {"strict"};
    t.in.mount_flags.mounts = {"~/src"};
    CHECK(error_of(t.in) ==
          "a mount was refused:\n  mount ~/src (--mount): it is not under an allowed root "
          "(mountPolicy.allowedRoots: " +
              t.in.env.home + "/agentctl/workspaces)");
}

TEST_CASE("start: mounts resolve only against the profile's mountPolicy", "[spec][start]") {
    Tree t;
    fs::create_directories(t.in.env.home + "/src/app");
    std::vector<Mount> previous = {{t.in.env.home + "/src", "/src", false, "--mount"}};
    CHECK_FALSE(resolve_start_mounts("box", {}, {}, previous, t.in.env).has_value());
    MountFlags flags;
    flags.writable = true;
    auto mounts = resolve_start_mounts("box", {}, flags, previous, t.in.env);
    REQUIRE(mounts.has_value());
    REQUIRE(mounts->size() == 1);
    CHECK((*mounts)[0].writable);
    flags = {};
    flags.none = true;
    CHECK(resolve_start_mounts("box", {}, flags, previous, t.in.env)->empty());
    flags = {};
    flags.mounts = {"~/.ssh:/keys"};
    CHECK_THROWS_WITH(resolve_start_mounts("box", {}, flags, previous, t.in.env),
                      "a mount was refused:\n  mount ~/.ssh (--mount): " + t.in.env.home +
                          "/.ssh is refused (credentials or backend state)");
    flags.mounts = {};
    flags.only = true;
    CHECK_THROWS_WITH(
        resolve_start_mounts("box", {"strict"}, MountFlags{{"~/src/app"}, true, false, false}, previous, t.in.env),
        "a mount was refused:\n  mount ~/src/app (--mount): it is not under an allowed root "
        "(mountPolicy.allowedRoots: " +
            t.in.env.home + "/agentctl/workspaces)");
}

TEST_CASE("a --mount onto the profile's /workspace replaces it and says so", "[spec][mounts]") {
    Tree t;
    fs::create_directories(t.in.env.home + "/src/app");
    t.in.mount_flags.mounts = {"~/src/app:/workspace/:w"};
    std::vector<std::string> notices;
    auto spec = compute_sandbox_spec(t.in, &notices);
    REQUIRE(spec.mounts.size() == 1);
    CHECK(spec.mounts[0].host_path == t.in.env.home + "/src/app");
    CHECK(spec.mounts[0].guest_path == "/workspace");
    CHECK(spec.mounts[0].writable);
    CHECK(spec.mounts[0].origin == "--mount");
    REQUIRE(notices.size() == 1);
    CHECK(
        notices[0].starts_with("--mount ~/src/app:/workspace replaces the mount of ~/agentctl/workspaces/box at "
                               "/workspace (profile default"));
    // the replaced workspace directory is not created
    CHECK_FALSE(fs::exists(t.in.env.home + "/agentctl/workspaces/box"));
}

TEST_CASE("a --mount inside the profile's /workspace is still an overlap, with a hint", "[spec][mounts]") {
    Tree t;
    fs::create_directories(t.in.env.home + "/src/app");
    t.in.mount_flags.mounts = {"~/src/app:/workspace/app"};
    try {
        (void)compute_sandbox_spec(t.in);
        FAIL("no error");
    } catch (const Error& error) {
        CHECK(std::string(error.what()).find("/workspace (profile default") != std::string::npos);
        CHECK(std::string(error.what()).find("/workspace/app (--mount) overlap in the guest") != std::string::npos);
        CHECK(error.hint().find("--mount ~/src/app:/workspace:w replaces the profile's /workspace") !=
              std::string::npos);
        CHECK(error.hint().find("--mount-only") != std::string::npos);
    }
}

TEST_CASE("start: a --mount onto a current mount's guest path replaces it", "[spec][start]") {
    Tree t;
    fs::create_directories(t.in.env.home + "/src/app");
    std::vector<Mount> previous = {{t.in.env.home + "/src", "/workspace", false, "profile default"}};
    MountFlags flags;
    flags.mounts = {"~/src/app:/workspace:w"};
    std::vector<std::string> notices;
    auto mounts = resolve_start_mounts("box", {}, flags, previous, t.in.env, &notices);
    REQUIRE(mounts.has_value());
    REQUIRE(mounts->size() == 1);
    CHECK((*mounts)[0].host_path == t.in.env.home + "/src/app");
    CHECK(notices == std::vector<std::string>{"--mount ~/src/app:/workspace replaces the mount of " + t.in.env.home +
                                              "/src at /workspace (profile default)"});
}

TEST_CASE("the process limit: --processes lowers it and cannot raise it", "[spec][processes]") {
    Tree t;
    t.in.processes = "100";
    CHECK(compute_sandbox_spec(t.in).resources.processes == 100);
    t.in.processes = "100000";
    CHECK(compute_sandbox_spec(t.in).resources.processes == 2048);  // the default profile's limit stays
    t.in.processes = "0";
    CHECK_THROWS_WITH(compute_sandbox_spec(t.in),
                      Catch::Contains("invalid --processes \"0\": a whole number from 1 to 1000000"));
}

TEST_CASE("sizes: docker's units get a did-you-mean, and memory a sandbox cannot boot with is refused", "[spec]") {
    CHECK(size_problem("4GiB", true).empty());
    CHECK(size_problem("4G", true) == "a size above 0 such as 4GiB, 512MiB or 20GB; did you mean 4GiB?");
    CHECK(size_problem("512m", false) == "a size above 0 such as 4GiB, 512MiB or 20GB; did you mean 512MiB?");
    CHECK(size_problem("G", false) == "a size above 0 such as 4GiB, 512MiB or 20GB");
    CHECK(size_problem("1B", true) == "at least 64MiB: a sandbox cannot boot with less");
    CHECK(size_problem("1B", false).empty());  // a disk size has no such floor here
    CHECK(size_problem("64MiB", true).empty());
}

TEST_CASE("upload budgets: --budget and profiles only tighten, the organisation's floor included", "[spec][budgets]") {
    Tree t;
    // The organisation's `work` is the floor under the project's `work`.
    t.profile(t.in.env.org_dir, "work", R"(  network:
    budgets: ["api.test:443=10MiB"]
    defaultBudget: 100MiB
)");
    t.profile(t.in.env.project_dir, "work", R"(  network:
    budgets: ["api.test:443=1GiB", "uploads.test:443=5MiB"]
    defaultBudget: 1GiB
)");
    t.in.profiles = {"work"};
    auto network = compute_sandbox_spec(t.in).network;
    auto budget_of = [&](const std::string& host) -> std::uint64_t {
        for (const auto& budget : network.budgets) {
            if (budget.host == host && budget.port == 443) return budget.bytes;
        }
        return 0;
    };
    CHECK(budget_of("api.test") == 10ULL << 20);  // the project cannot raise the organisation's
    CHECK(budget_of("uploads.test") == 5ULL << 20);
    CHECK(network.default_budget == 100ULL << 20);

    // --budget lowers, and cannot raise.
    t.in.budgets = {"api.test:443=1MiB", "uploads.test:443=1GiB", "new.test:443=2KiB"};
    network = compute_sandbox_spec(t.in).network;
    CHECK(budget_of("api.test") == 1ULL << 20);
    CHECK(budget_of("uploads.test") == 5ULL << 20);
    CHECK(budget_of("new.test") == 2048);

    // The policy file carries both to the proxy.
    auto file = to_policy_file(network);
    CHECK(file["defaultBudget"] == 100ULL << 20);
    CHECK(from_policy_file(file).default_budget == 100ULL << 20);
}

TEST_CASE("a bad budget names the flag or the profile's file, line and field", "[spec][budgets]") {
    Tree t;
    t.in.budgets = {"api.test:443=none"};
    CHECK(error_of(t.in) == "invalid budget \"api.test:443=none\": none lifts a budget of a running sandbox only");
    t.in.budgets = {"api.test=5MiB"};
    CHECK(error_of(t.in) == "invalid budget \"api.test=5MiB\": it needs exactly one port (HOST:PORT)");
    t.in.budgets.clear();
    t.profile(t.in.env.project_dir, "capped", R"(  network:
    budgets: ["*.api.test:443=5MiB"]
    defaultBudget: 5Q
)");
    t.in.profiles = {"capped"};
    const auto file = t.in.env.project_dir + "/capped.yaml";
    const auto error = error_of(t.in);
    INFO(error);
    CHECK(error.find(file +
                     ":5:15: field spec.network.budgets[0]: invalid budget \"*.api.test:443=5MiB\": a budget is for "
                     "one host, not a wildcard") != std::string::npos);
    CHECK(error.find(file + ":6:20: field spec.network.defaultBudget: \"5Q\" is not a size above 0") !=
          std::string::npos);
}
