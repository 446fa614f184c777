// The agent install's steps (provider/common/agent_install.hpp): the tool
// look-up and the check that the agent runs are run here with the host's own
// shell, against a stand-in agent in a scratch home.
#include <catch2/catch.hpp>

#include <filesystem>

#include "agentctl/process.hpp"
#include "core/files.hpp"
#include "provider/common/agent_install.hpp"
#include "support/temp_dir.hpp"

using namespace agentctl;
namespace common = agentctl::provider::common;
namespace fs = std::filesystem;

namespace {

struct ScratchHome {
    test::TempDir dir;
    fs::path home = dir.path;
    // Runs `script` with /bin/sh as the sandbox's exec does: HOME, and a PATH
    // of ~/.local/bin before the system's.
    [[nodiscard]] ProcessResult run(const std::string& script) const {
        auto runner = make_real_process_runner();
        ProcessRequest request;
        request.argv = {"env",
                        "-i",
                        "HOME=" + home.string(),
                        "USER=nobody-here",
                        "PATH=" + (home / ".local/bin").string() + ":/usr/sbin:/usr/bin:/sbin:/bin",
                        "/bin/sh",
                        "-c",
                        script};
        return runner->run(request);
    }
};

}  // namespace

TEST_CASE("the installer runs with pipefail: a failed download fails the install", "[agent]") {
    const auto& claude = policy::find_agent("claude");
    const auto argv = common::agent_install_argv(claude);
    CHECK(argv ==
          std::vector<std::string>{"bash", "-o", "pipefail", "-c", "curl -fsSL https://claude.ai/install.sh | bash"});
    auto runner = make_real_process_runner();
    ProcessRequest request;
    request.argv = {"bash", "-o", "pipefail", "-c", "false | bash"};
    CHECK(runner->run(request).exit_code != 0);  // what `sh -c` ran as a success before
}

TEST_CASE("the tools an installer needs are looked up and the missing ones named", "[agent]") {
    ScratchHome scratch;
    const auto& gemini = policy::find_agent("gemini");
    auto found = scratch.run(common::agent_tools_script(gemini));
    // This host may or may not have node and npm: the script says exactly which it lacks.
    const bool has_npm = scratch.run("command -v npm").exit_code == 0;
    const bool has_node = scratch.run("command -v node").exit_code == 0;
    std::vector<std::string> expected;
    if (!has_node) expected.emplace_back("node");
    if (!has_npm) expected.emplace_back("npm");
    CHECK(common::parse_missing_tools(found.out) == expected);
    CHECK((found.exit_code == 0) == expected.empty());

    policy::Agent needs_nothing_here = gemini;
    static constexpr std::string_view k_absent[] = {"sh", "agentctl-no-such-tool"};
    needs_nothing_here.needs = k_absent;
    auto missing = scratch.run(common::agent_tools_script(needs_nothing_here));
    CHECK(missing.exit_code == 1);
    CHECK(common::parse_missing_tools(missing.out) == std::vector<std::string>{"agentctl-no-such-tool"});
}

TEST_CASE("an image that lists its packages is checked before anything is made", "[agent]") {
    const auto& gemini = policy::find_agent("gemini");
    const auto& claude = policy::find_agent("claude");
    CHECK_FALSE(common::tools_missing_from_image(gemini, std::nullopt, {}));  // a foreign image says nothing
    CHECK(*common::tools_missing_from_image(gemini, std::string("curl sudo"), {}) ==
          std::vector<std::string>{"node", "npm"});
    CHECK(common::tools_missing_from_image(gemini, std::string("curl nodejs npm"), {})->empty());
    CHECK(common::tools_missing_from_image(gemini, std::string("curl"), {"nodejs", "npm"})->empty());
    CHECK(common::tools_missing_from_image(claude, std::string("curl"), {})->empty());  // bash: always there
    CHECK(*common::tools_missing_from_image(claude, std::string("sudo"), {}) == std::vector<std::string>{"curl"});
    const auto error = common::agent_tools_missing("gemini", "the image img", {"node", "npm"});
    CHECK(std::string(error.what()) == "the installer of gemini needs node and npm, which the image img does not have");
    CHECK_THAT(error.hint(), Catch::Contains("--package nodejs --package npm --allow-preset apt"));
}

TEST_CASE("an install counts only when the agent runs, on the PATH and in a login shell", "[agent]") {
    ScratchHome scratch;
    const auto& claude = policy::find_agent("claude");
    auto absent = scratch.run(common::agent_check_script(claude));
    CHECK(absent.exit_code != 0);
    CHECK(common::agent_check_step(claude, absent.exit_code) == "finding claude on the sandbox user's PATH");

    const auto bin = scratch.home / ".local/bin";
    fs::create_directories(bin);
    core::write_file_atomic(bin / "claude", "#!/bin/sh\necho broken >&2\nexit 3\n", 0755);
    auto broken = scratch.run(common::agent_check_script(claude));
    CHECK(common::agent_check_step(claude, broken.exit_code) == "running claude --version");
    CHECK_THAT(broken.out, Catch::Contains("broken"));

    core::write_file_atomic(bin / "claude", "#!/bin/sh\necho '1.2.3 (stand-in)'\n", 0755);
    // A login shell reads /etc/profile, which sets its own PATH; Debian's
    // ~/.profile puts ~/.local/bin on it (agentctl's profile.d script in a sandbox).
    core::write_file_atomic(scratch.home / ".profile", "PATH=\"$HOME/.local/bin:$PATH\"\n", 0644);
    auto works = scratch.run(common::agent_check_script(claude));
    CHECK(works.exit_code == 0);
    CHECK(works.out == "1.2.3 (stand-in)\n");

    fs::remove(scratch.home / ".profile");
    auto no_login_path = scratch.run(common::agent_check_script(claude));
    CHECK(common::agent_check_step(claude, no_login_path.exit_code) == "running claude --version in a login shell");
}

TEST_CASE("an agent its vendor installs in a directory of its own is linked onto the PATH", "[agent]") {
    ScratchHome scratch;
    const auto& opencode = policy::find_agent("opencode");
    REQUIRE(opencode.home_bin == ".opencode/bin");
    fs::create_directories(scratch.home / ".opencode/bin");
    core::write_file_atomic(scratch.home / ".opencode/bin/opencode", "#!/bin/sh\necho 0.9\n", 0755);
    core::write_file_atomic(scratch.home / ".profile", "PATH=\"$HOME/.local/bin:$PATH\"\n", 0644);
    auto result = scratch.run(common::agent_check_script(opencode));
    CHECK(result.exit_code == 0);
    CHECK(fs::read_symlink(scratch.home / ".local/bin/opencode") == scratch.home / ".opencode/bin/opencode");
}

TEST_CASE("a failed install names the step and quotes the installer's last output", "[agent]") {
    const auto error =
        common::agent_install_failed("claude", "work", common::k_step_installer, 22, "curl: (22) 403\n", "retry");
    CHECK(std::string(error.what()) ==
          "installing claude in \"work\" failed while running the installer (exit code 22): curl: (22) 403");
    CHECK(error.hint() == "check `agentctl logs work --network` for refused hosts; retry");
}
