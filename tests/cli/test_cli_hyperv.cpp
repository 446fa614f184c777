// The hyperv provider through the built binary: the gate, the refusals and
// the --preview plan. Nothing here needs Windows: the provider runs nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;

namespace {

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

}  // namespace

TEST_CASE("hyperv: capabilities report the stub's matrix") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "hyperv", "capabilities", "--output", "json"});
    REQUIRE(r.exit_code == 0);
    const auto features = nlohmann::json::parse(r.out).at("hyperv").at("features");
    int manual = 0;
    for (const auto& [feature, capability] : features.items()) {
        INFO(feature);
        const auto status = capability.at("status").get<std::string>();
        CHECK((status == "UnderDevelopment" || status == "ManualWorkaround"));
        CHECK_FALSE(capability.at("message").get<std::string>().empty());
        if (status == "ManualWorkaround") ++manual;
    }
    CHECK(manual == 3);
    CHECK(features.at("fs.mount").at("status") == "ManualWorkaround");
    CHECK(features.at("network.port-publish").at("status") == "ManualWorkaround");
}

TEST_CASE("hyperv: create without preview is refused with exit 2 and the plan's message") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "hyperv", "create", "tbox", "--image", "C:\\base.vhdx", "--mount-none"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.rfind("agentctl: create is under development on the hyperv provider: ", 0) == 0);
    CHECK(r.err.find("hint: run `agentctl capabilities --provider hyperv`") != std::string::npos);
}

TEST_CASE("hyperv: preview create prints one PowerShell line per step and changes nothing") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "hyperv", "--preview", "create", "tbox", "--image", "C:\\Images\\base image.vhdx",
                      "--mount-none", "--allow", "api.github.com:443"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto out = lines(r.out);
    REQUIRE(out.size() > 10);
    for (const auto& line : out) {
        INFO(line);
        CHECK(line.rfind("powershell.exe -NoProfile -NonInteractive -Command '", 0) == 0);
    }
    CHECK(r.out.find("New-VM -Name '\\''tbox'\\'' -Generation 2") != std::string::npos);
    CHECK(r.out.find("-ParentPath '\\''C:\\Images\\base image.vhdx'\\''") != std::string::npos);
    CHECK(r.out.find("Resolve-DnsName -Name '\\''api.github.com'\\''") != std::string::npos);
    CHECK(r.out.find("-RemoteIPAddress ANY -Weight 1") != std::string::npos);
    CHECK(r.err.find("WARNING: the hyperv provider is a stub") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(cli.home() / ".config/agentctl/hyperv"));
    CHECK_FALSE(std::filesystem::exists(cli.home() / ".local/state/agentctl/hyperv"));
}

TEST_CASE("hyperv: a published port stops at the manual plan unless --force-partial") {
    CliSandbox cli;
    const std::vector<std::string> base{"--provider", "hyperv",    "--preview",    "create", "tbox",
                                        "--image",    "base.vhdx", "--mount-none", "--port", "8080:80"};
    auto r = cli.run(base);
    CHECK(r.exit_code == 3);
    CHECK(r.out.empty());
    CHECK(r.err.find("netsh interface portproxy add v4tov4") != std::string::npos);

    auto forced = base;
    forced.push_back("--force-partial");
    r = cli.run(forced);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find(
              "netsh interface portproxy add v4tov4 listenaddress=127.0.0.1 listenport=8080 connectaddress=172.30.") !=
          std::string::npos);
}

TEST_CASE("hyperv: preview stop, start and delete print their plans") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "hyperv", "--preview", "stop", "tbox", "--force"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "powershell.exe -NoProfile -NonInteractive -Command 'Stop-VM -Name '\\''tbox'\\'' -TurnOff'\n");

    r = cli.run({"--provider", "hyperv", "--preview", "start", "tbox"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "powershell.exe -NoProfile -NonInteractive -Command 'Start-VM -Name '\\''tbox'\\'''\n");

    r = cli.run({"--provider", "hyperv", "--preview", "delete", "tbox", "--force"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("Remove-VM -Force") != std::string::npos);
    CHECK(r.out.find("Remove-VMSwitch -Force") != std::string::npos);
}

TEST_CASE("hyperv: commands without a plan are refused with exit 2, preview or not") {
    CliSandbox cli;
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--provider", "hyperv", "list"},
          std::vector<std::string>{"--provider", "hyperv", "status", "tbox"},
          std::vector<std::string>{"--provider", "hyperv", "exec", "tbox", "--", "id"},
          std::vector<std::string>{"--provider", "hyperv", "stop", "tbox"}}) {
        INFO(args[2]);
        auto r = cli.run(args);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
    }
}
