// Completion scripts come from the CLI tree and are valid shell.
#include <catch2/catch.hpp>
#include <fstream>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;

TEST_CASE("bash completion is valid bash and offers commands, subcommands and flags") {
    CliSandbox cli;
    auto r = cli.run({"completion", "bash"});
    REQUIRE(r.exit_code == 0);
    const auto script = cli.home() / "agentctl.bash";
    cli.write(script, r.out);

    auto complete = [&](const std::string& line) {
        // Source the script and ask it to complete `line` the way bash would.
        auto runner = agentctl::make_real_process_runner();
        agentctl::ProcessRequest request;
        request.argv = {"bash", "-c",
                        "source \"$1\"; read -ra COMP_WORDS <<< \"$2\"; [[ \"$2\" == *' ' ]] && COMP_WORDS+=(''); "
                        "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _agentctl; printf '%s\\n' \"${COMPREPLY[@]}\"",
                        "bash", script.string(), line};
        return runner->run(request).out;
    };
    CHECK(complete("agentctl cre") == "create\n");
    CHECK(complete("agentctl profile pr") == "presets\n");
    CHECK(complete("agentctl create demo --allow-l") == "--allow-lan\n");
    CHECK(complete("agentctl --provider ") == "incus\nlima\nhyperv\n");
    CHECK(complete("agentctl egress") == "\n");  // hidden
}

TEST_CASE("zsh and fish completion scripts are generated from the same tree") {
    CliSandbox cli;
    auto zsh = cli.run({"completion", "zsh"});
    REQUIRE(zsh.exit_code == 0);
    CHECK(zsh.out.rfind("#compdef agentctl\n", 0) == 0);
    CHECK(zsh.out.find("complete -F _agentctl agentctl") != std::string::npos);

    auto fish = cli.run({"completion", "fish"});
    REQUIRE(fish.exit_code == 0);
    CHECK(fish.out.find("complete -c agentctl -n '__fish_use_subcommand' -a create -d 'Create a sandbox") !=
          std::string::npos);
    CHECK(fish.out.find("-n '__fish_seen_subcommand_from create' -l allow-lan") != std::string::npos);
    CHECK(fish.out.find("-l provider -x -a 'incus lima hyperv'") != std::string::npos);
    CHECK(fish.out.find("egress-proxy") == std::string::npos);
}

TEST_CASE("an unknown shell is refused") {
    CliSandbox cli;
    auto r = cli.run({"completion", "tcsh"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("agentctl: SHELL: tcsh not in {bash,zsh,fish}") == 0);
}
