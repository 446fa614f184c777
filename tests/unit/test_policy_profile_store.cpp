// The profile search order, the organisation floor, built-ins, and the
// environment, with real profile files in a temp dir.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "policy/profile_store.hpp"

using namespace agentctl;
using namespace agentctl::policy;
namespace fs = std::filesystem;

namespace {

struct Tree {
    fs::path root;
    Environment env;
    Tree() {
        std::string templ = (fs::temp_directory_path() / "agentctl-store-XXXXXX").string();
        root = fs::canonical(::mkdtemp(templ.data()));
        env.home = (root / "home").string();
        env.cwd = (root / "project").string();
        env.project_dir = env.cwd + "/.agentctl/profiles";
        env.config_dir = env.home + "/.config/agentctl";
        env.user_dir = env.config_dir + "/profiles";
        env.org_dir = (root / "etc/agentctl/profiles").string();
        for (const auto& dir : {env.project_dir, env.user_dir, env.org_dir}) fs::create_directories(dir);
    }
    ~Tree() { fs::remove_all(root); }
    void write(const std::string& dir, const std::string& name, const std::string& spec,
               const std::string& description = "") {
        std::ofstream out(dir + "/" + name + ".yaml");
        out << "apiVersion: agentctl.dev/v1\nkind: Profile\nmetadata:\n  name: " << name << "\n  description: \""
            << description << "\"\nspec:\n"
            << spec;
    }
};

}  // namespace

TEST_CASE("built-in profiles load through the same strict loader", "[store][builtin]") {
    Tree t;
    auto def = load_profile("default", t.env);
    CHECK(def.source == ProfileSource::BuiltIn);
    CHECK(def.path == "built-in:default");
    CHECK(def.spec.deny_lan == true);
    CHECK(def.spec.allow.empty());
    CHECK(def.spec.resources.cpu_cores == 2);
    CHECK(def.spec.resources.memory_bytes == 4ULL << 30);
    CHECK(def.spec.resources.disk_bytes == 20ULL << 30);
    REQUIRE(def.spec.mounts.size() == 1);
    CHECK(def.spec.mounts[0].host_path == "~/agentctl/workspaces/{{.Name}}");
    CHECK(def.spec.mounts[0].guest_path == "/workspace");
    CHECK(def.spec.mounts[0].writable);
    CHECK(def.spec.mount_policy.create_missing == true);
    auto strict = load_profile("strict", t.env);
    CHECK(strict.spec.resources.cpu_cores == 1);
    CHECK(strict.spec.resources.memory_bytes == 2ULL << 30);
    CHECK(strict.spec.resources.disk_bytes == 10ULL << 30);
    CHECK(*strict.spec.mount_policy.allowed_roots == std::vector<std::string>{t.env.home + "/agentctl/workspaces"});
    auto terminal = load_profile("terminal", t.env);
    CHECK(std::find(terminal.spec.packages.begin(), terminal.spec.packages.end(), "git") !=
          terminal.spec.packages.end());
    auto gui = load_profile("gui", t.env);
    CHECK(gui.spec.packages.size() > terminal.spec.packages.size());
    CHECK(gui.spec.viewer == "spice");
    CHECK(builtin_profile_names() == std::vector<std::string>{"default", "strict", "terminal", "gui"});
}

TEST_CASE("search order: project, user, organisation, built-in", "[store][search]") {
    Tree t;
    t.write(t.env.user_dir, "default", "  resources: {cpuCores: 3}\n", "user default");
    CHECK(load_profile("default", t.env).spec.resources.cpu_cores == 3);
    CHECK(load_profile("default", t.env).source == ProfileSource::User);
    t.write(t.env.project_dir, "default", "  resources: {cpuCores: 5}\n", "project default");
    CHECK(load_profile("default", t.env).spec.resources.cpu_cores == 5);
    CHECK(load_profile("default", t.env).source == ProfileSource::Project);
    t.write(t.env.org_dir, "team", "  resources: {cpuCores: 7}\n", "org team");
    auto team = load_profile("team", t.env);
    CHECK(team.source == ProfileSource::Organisation);
    CHECK(team.path == t.env.org_dir + "/team.yaml");
    CHECK_THROWS_WITH(load_profile("nosuch", t.env), "profile \"nosuch\" not found");
    CHECK_THROWS_WITH(load_profile("../etc/passwd", t.env), "invalid profile name \"../etc/passwd\"");
}

TEST_CASE("an organisation profile is a floor that a same-named project profile cannot loosen", "[store][floor]") {
    Tree t;
    t.write(t.env.org_dir, "work", R"(  network:
    denyLAN: true
    allow:
      - domain: git.corp.example
  mountPolicy:
    allowedRoots: [~/src]
    allowHome: false
    denyPaths: [~/src/secret]
  isolation: vm
)");
    t.write(t.env.project_dir, "work", R"(  network:
    denyLAN: false
    allow:
      - domain: pastebin.example
  mountPolicy:
    allowedRoots: [~/]
    allowHome: true
  isolation: container
)");
    auto work = load_profile("work", t.env);
    CHECK(work.source == ProfileSource::Project);
    CHECK(work.path == t.env.project_dir + "/work.yaml (over the organisation's " + t.env.org_dir + "/work.yaml)");
    CHECK(work.spec.deny_lan == true);
    REQUIRE(work.spec.allow.size() == 2);
    CHECK(work.spec.allow[0].origin == "profile work (" + t.env.org_dir + "/work.yaml:10)");
    CHECK(work.spec.allow[1].origin == "profile work (" + t.env.project_dir + "/work.yaml:10)");
    CHECK(*work.spec.mount_policy.allowed_roots == std::vector<std::string>{t.env.home + "/src"});
    CHECK(work.spec.mount_policy.allow_home == false);
    CHECK(work.spec.mount_policy.deny_paths == std::vector<std::string>{t.env.home + "/src/secret"});
    CHECK(work.spec.isolation == Isolation::Vm);
}

TEST_CASE("profile list shows every location, marks shadowed ones, survives a broken file", "[store][list]") {
    Tree t;
    t.write(t.env.project_dir, "default", "  resources: {cpuCores: 5}\n", "project default");
    t.write(t.env.user_dir, "mine", "  resources: {cpuCores: nope}\n", "broken");
    t.write(t.env.org_dir, "default", "  resources: {cpuCores: 1}\n", "org default");
    std::ofstream(t.env.user_dir + "/README.txt") << "not a profile";
    auto list = list_profiles(t.env);
    REQUIRE(list.size() == 7);
    CHECK(list[0].name == "default");
    CHECK(list[0].source == "project");
    CHECK(list[0].description == "project default");
    CHECK_FALSE(list[0].shadowed);
    CHECK(list[1].name == "mine");
    CHECK(list[1].description.starts_with("(invalid: " + t.env.user_dir + "/mine.yaml is invalid (1 problem):)"));
    CHECK(list[2].name == "default");
    CHECK(list[2].source == "organisation");
    CHECK_FALSE(list[2].shadowed);
    CHECK(list[3].name == "default");
    CHECK(list[3].source == "built-in");
    CHECK(list[3].shadowed);
    CHECK(list[4].name == "strict");
    CHECK_FALSE(list[4].shadowed);
    auto table = render_profile_list(list);
    CHECK(table.find("default   built-in (shadowed)") != std::string::npos);
    auto json = profile_list_to_json(list);
    CHECK(json[3]["shadowed"] == true);
    CHECK(json[0]["path"] == t.env.project_dir + "/default.yaml");
}

TEST_CASE("profile show: the profile with its allow file merged in, as data", "[store][show]") {
    Tree t;
    std::ofstream(t.env.org_dir + "/hosts.txt") << "# corp\nartifacts.corp.example:443\n";
    t.write(t.env.org_dir, "corp", "  network:\n    allowFile: hosts.txt\n    allowPresets: [apk]\n");
    auto profile = load_profile("corp", t.env);
    auto json = profile_to_json(profile);
    CHECK(json["name"] == "corp");
    CHECK(json["source"] == "organisation");
    CHECK(json["spec"]["network"]["denyLAN"] == true);
    CHECK(json["spec"]["network"]["allow"][0]["entry"] == "artifacts.corp.example:443");
    CHECK(json["spec"]["network"]["allow"][0]["origin"] == "allow file " + t.env.org_dir + "/hosts.txt:2");
    CHECK(json["spec"]["network"]["presetRules"][0]["entry"] == "dl-cdn.alpinelinux.org:443");
    CHECK(json["spec"]["network"]["presetRules"][0]["origin"] == "preset apk");
    CHECK(json["spec"]["mountPolicy"]["allowedRoots"].is_null());
    auto yaml = profile_to_yaml(profile);
    CHECK(yaml.find("name: corp\n") != std::string::npos);
    CHECK(yaml.find("- entry: \"artifacts.corp.example:443\"\n") != std::string::npos);
    CHECK(yaml.find("denyLAN: true\n") != std::string::npos);
}

TEST_CASE("the environment: XDG_CONFIG_HOME, AGENTCTL_ORG_DIR and profileDir", "[store][env]") {
    Tree t;
    auto saved_home = std::getenv("HOME") ? std::string(std::getenv("HOME")) : std::string();
    ::setenv("HOME", t.env.home.c_str(), 1);
    ::unsetenv("XDG_CONFIG_HOME");
    ::unsetenv("AGENTCTL_ORG_DIR");
    auto env = environment_from_process();
    CHECK(env.home == t.env.home);
    CHECK(env.user_dir == t.env.home + "/.config/agentctl/profiles");
    CHECK(env.config_dir == t.env.home + "/.config/agentctl");
    CHECK(env.org_dir == "/etc/agentctl/profiles");
    CHECK(env.default_profile == "default");
    CHECK(env.project_dir == fs::current_path().string() + "/.agentctl/profiles");
    CHECK(environment_from_process("~/org", "strict").org_dir == t.env.home + "/org");
    CHECK(environment_from_process("~/org", "strict").default_profile == "strict");
    ::setenv("XDG_CONFIG_HOME", (t.root / "xdg").c_str(), 1);
    ::setenv("AGENTCTL_ORG_DIR", (t.root / "etc/agentctl").c_str(), 1);
    env = environment_from_process("/ignored");
    CHECK(env.user_dir == (t.root / "xdg/agentctl/profiles").string());
    CHECK(env.org_dir == t.env.org_dir);
    ::setenv("XDG_CONFIG_HOME", "relative/ignored", 1);
    CHECK(environment_from_process().user_dir == t.env.home + "/.config/agentctl/profiles");
    ::unsetenv("XDG_CONFIG_HOME");
    ::unsetenv("AGENTCTL_ORG_DIR");
    ::unsetenv("HOME");
    CHECK_THROWS_WITH(environment_from_process(), "$HOME is not set to an absolute path");
    if (!saved_home.empty()) ::setenv("HOME", saved_home.c_str(), 1);
}

TEST_CASE("presets and packages render as tables and data", "[store][catalog]") {
    auto presets = render_presets_table();
    CHECK(presets.starts_with("apt: Debian and Ubuntu package archives\n  archive.ubuntu.com:80,443\n"));
    CHECK(presets.find("gitlab: GitLab.com\n  gitlab.com:443\n") != std::string::npos);
    auto json = presets_to_json();
    CHECK(json.size() == 6);
    CHECK(json[4]["name"] == "github");
    CHECK(json[4]["entries"].size() == 5);
    auto packages = render_packages_table();
    CHECK(packages.starts_with("NAME "));
    CHECK(packages.find("openssh-client   openssh-client      openssh-clients") != std::string::npos);
    auto pj = packages_to_json();
    bool found = false;
    for (const auto& item : pj) {
        if (item["name"] == "procps") {
            found = true;
            CHECK(item["dnf"] == nlohmann::json::array({"procps-ng"}));
        }
    }
    CHECK(found);
}
