// The policy layer through the built binary: `profile ...` and `policy check`,
// with an isolated HOME, config and organisation directory. Needs the agentctl
// target built (the full build does that).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agentctl/process.hpp"
#include "policy/profile_store.hpp"
#include "support/build_paths.hpp"

namespace fs = std::filesystem;
using namespace agentctl;

namespace {

class Cli {
public:
    Cli() {
        std::string templ = (fs::temp_directory_path() / "agentctl-policy-cli-XXXXXX").string();
        m_root = fs::canonical(::mkdtemp(templ.data()));
        fs::create_directories(m_root / "home");
        fs::create_directories(m_root / "org/profiles");
        fs::create_directories(m_root / "work");
    }
    ~Cli() { fs::remove_all(m_root); }

    ProcessResult run(std::vector<std::string> args) {
        REQUIRE(fs::exists(agentctl::test::agentctl_binary()));
        ProcessRequest request;
        request.argv = {agentctl::test::agentctl_binary()};
        request.argv.insert(request.argv.end(), args.begin(), args.end());
        request.env = {{"HOME", (m_root / "home").string()},
                       {"XDG_CONFIG_HOME", (m_root / "home/.config").string()},
                       {"AGENTCTL_ORG_DIR", (m_root / "org").string()}};
        request.cwd = (m_root / "work").string();
        request.timeout = std::chrono::seconds(30);
        return m_runner->run(request);
    }

    void org_profile(const std::string& name, const std::string& text) {
        std::ofstream(m_root / "org/profiles" / (name + ".yaml")) << text;
    }
    [[nodiscard]] std::string home() const { return (m_root / "home").string(); }
    [[nodiscard]] std::string org() const { return (m_root / "org/profiles").string(); }

private:
    fs::path m_root;
    std::unique_ptr<ProcessRunner> m_runner = make_real_process_runner();
};

}  // namespace

TEST_CASE("cli: profile presets and packages print the catalog", "[cli]") {
    Cli cli;
    auto presets = cli.run({"profile", "presets"});
    CHECK(presets.exit_code == 0);
    CHECK(presets.out == policy::render_presets_table());
    auto packages = cli.run({"--output", "json", "profile", "packages"});
    REQUIRE(packages.exit_code == 0);
    auto json = nlohmann::json::parse(packages.out);
    bool found = false;
    for (const auto& item : json) {
        if (item["name"] == "shellcheck") {
            found = true;
            CHECK(item["dnf"] == nlohmann::json::array({"ShellCheck"}));
        }
    }
    CHECK(found);
}

TEST_CASE("cli: profile list and show see the organisation's profiles", "[cli]") {
    Cli cli;
    cli.org_profile("corp",
                    "apiVersion: agentctl.dev/v1\nkind: Profile\nmetadata:\n  description: corp baseline\nspec:\n"
                    "  network:\n    allow:\n      - domain: git.corp.example\n        ports: [443]\n");
    auto list = cli.run({"profile", "list"});
    CHECK(list.exit_code == 0);
    CHECK(list.out.find("corp      organisation  " + cli.org() + "/corp.yaml") != std::string::npos);
    auto show = cli.run({"--output", "json", "profile", "show", "corp"});
    REQUIRE(show.exit_code == 0);
    auto json = nlohmann::json::parse(show.out);
    CHECK(json["spec"]["network"]["allow"][0]["entry"] == "git.corp.example:443");
    CHECK(json["spec"]["network"]["allow"][0]["origin"] == "profile corp (" + cli.org() + "/corp.yaml:8)");
    auto strict = cli.run({"profile", "show", "strict"});
    CHECK(strict.exit_code == 0);
    CHECK(strict.out.find("allowedRoots:\n      - " + cli.home() + "/agentctl/workspaces\n") != std::string::npos);
}

TEST_CASE("cli: an invalid profile fails with every problem and exit 1", "[cli]") {
    Cli cli;
    cli.org_profile("bad",
                    "apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network: {denyLAN: maybe}\n  cpu: 2\n");
    auto result = cli.run({"profile", "show", "bad"});
    CHECK(result.exit_code == 1);
    CHECK(result.out.empty());
    CHECK(result.err.find("agentctl: " + cli.org() + "/bad.yaml is invalid (2 problems):\n") == 0);
    CHECK(
        result.err.find("  " + cli.org() +
                        "/bad.yaml:5:3: field spec.cpu: unknown field (known fields here: network, resources, mounts, "
                        "mountPolicy, console, packages, isolation, secrets)\n") != std::string::npos);
    CHECK(result.err.find("  " + cli.org() +
                          "/bad.yaml:4:22: field spec.network.denyLAN: must be true or false, got "
                          "\"maybe\"\n") != std::string::npos);
}

TEST_CASE("cli: policy check allows and refuses with exit codes 0 and 4", "[cli]") {
    Cli cli;
    auto ok = cli.run({"policy", "check", "--allow", "93.184.216.34:443", "1572395042:443"});
    CHECK(ok.exit_code == 0);
    CHECK(ok.out.find("Verdict:     allowed (allowlisted)\n") != std::string::npos);
    CHECK(ok.out.find("Rule:        93.184.216.34:443 (from --allow)\n") != std::string::npos);
    auto loop = cli.run({"policy", "check", "--allow", "93.184.216.34:443", "0x7f.1:443"});
    CHECK(loop.exit_code == 4);
    CHECK(loop.out.find("Verdict:     refused (loopback)\n") != std::string::npos);
    auto local = cli.run({"--output", "json", "policy", "check", "--allow", "localhost", "localhost:22"});
    CHECK(local.exit_code == 4);
    auto json = nlohmann::json::parse(local.out);
    CHECK(json["reason"] == "loopback");
    CHECK(json["allowed"] == false);
    auto bad = cli.run({"policy", "check", "--allow", "https://example.com/x", "example.com"});
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("agentctl: invalid allow entry \"https://example.com/x\": a URL with a path, query or fragment "
                       "cannot be enforced: filtering is by host and port only\n") == 0);
}
