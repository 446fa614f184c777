// Completion scripts come from the CLI tree, are valid shell, and complete
// values: sandbox names, profiles, agents, presets, config keys, files.
#include <catch2/catch.hpp>
#include <fstream>

#include "cli_runner.hpp"
#include "support/build_paths.hpp"

using agentctl::test::CliSandbox;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Sources the bash script and asks it to complete `line` the way bash would
// (the cursor at the end), with the built agentctl first on PATH.
struct BashCompleter {
    CliSandbox& cli;
    std::filesystem::path script;

    explicit BashCompleter(CliSandbox& c) : cli(c), script(c.home() / "agentctl.bash") {
        auto r = cli.run({"completion", "bash"});
        REQUIRE(r.exit_code == 0);
        cli.write(script, r.out);
    }

    std::string operator()(const std::string& line) const {
        auto runner = agentctl::make_real_process_runner();
        agentctl::ProcessRequest request;
        request.argv = {"bash",
                        "-c",
                        "source \"$1\"; read -ra COMP_WORDS <<< \"$2\"; [[ \"$2\" == *' ' ]] && COMP_WORDS+=(''); "
                        "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _agentctl; printf '%s\\n' \"${COMPREPLY[@]}\"",
                        "bash",
                        script.string(),
                        line};
        const auto bin_dir = std::filesystem::path(agentctl::test::agentctl_binary()).parent_path().string();
        request.env = {{"HOME", cli.home().string()},
                       {"XDG_CONFIG_HOME", (cli.home() / ".config").string()},
                       {"AGENTCTL_ORG_DIR", cli.org_dir().string()},
                       {"PATH", bin_dir + ":/usr/bin:/bin"}};
        request.cwd = cli.home().string();
        return runner->run(request).out;
    }
};

}  // namespace

TEST_CASE("bash completion offers commands, subcommands and flags") {
    CliSandbox cli;
    BashCompleter complete(cli);
    CHECK(complete("agentctl cre") == "create\n");
    CHECK(complete("agentctl profile pr") == "presets\n");
    CHECK(complete("agentctl create tbox --allow-l") == "--allow-lan\n");
    CHECK(complete("agentctl --provider ") == "incus\nlima\nhyperv\n");
    CHECK(complete("agentctl -o ") == "table\njson\n");
    CHECK(complete("agentctl egress") == "\n");   // hidden
    CHECK(complete("agentctl __compl") == "\n");  // hidden
    CHECK(complete("agentctl rm --forc") == "--force\n--force-partial\n");
    CHECK(complete("agentctl ls --q") == "--quiet\n");
}

TEST_CASE("bash completion offers values by what each argument takes") {
    CliSandbox cli;
    BashCompleter complete(cli);
    CHECK(complete("agentctl completion ") == "bash\nzsh\nfish\n");
    CHECK(complete("agentctl help cr") == "create\n");
    CHECK(complete("agentctl create tbox --agent cl") == "claude\n");
    CHECK(complete("agentctl create tbox --allow-preset py") == "pypi\n");
    CHECK(complete("agentctl config get default") == "defaultProfile\n");
    CHECK(complete("agentctl config set incus.storage") == "incus.storagePool=\n");
    CHECK(complete("agentctl create tbox --isolation ") == "vm\ncontainer\n");
    // Profiles come from `agentctl __complete profiles`: built-in and the user's own.
    cli.write(cli.home() / ".config/agentctl/profiles/u12team.yaml",
              "apiVersion: agentctl.dev/v1\nkind: Profile\nmetadata:\n  name: u12team\nspec: {}\n");
    CHECK(complete("agentctl profile show u12") == "u12team\n");
    CHECK(complete("agentctl create tbox --profile stri") == "strict\n");
    // Files for --mount, --allow-file and --spec; a flag's value is skipped when counting positionals.
    cli.write(cli.home() / "allow-list.txt", "example.com\n");
    CHECK(complete("agentctl create tbox --allow-file allow-l") == "allow-list.txt\n");
    CHECK(complete("agentctl start tbox --mount allow-l") == "allow-list.txt\n");
    // Without a provider there are no sandboxes to offer, quietly.
    CHECK(complete("agentctl stop ") == "\n");
}

TEST_CASE("zsh and fish completion scripts are generated from the same tree") {
    CliSandbox cli;
    auto zsh = cli.run({"completion", "zsh"});
    REQUIRE(zsh.exit_code == 0);
    CHECK(zsh.out.rfind("#compdef agentctl\n", 0) == 0);
    CHECK(contains(zsh.out, "complete -o default -F __agentctl_bash agentctl"));
    CHECK(contains(zsh.out, "_bash_complete -o default -F __agentctl_bash\n"));

    auto fish = cli.run({"completion", "fish"});
    REQUIRE(fish.exit_code == 0);
    const auto& f = fish.out;
    CHECK(contains(f, "complete -c agentctl -n \"__agentctl_at ''\" -a create -d 'Create a sandbox"));
    CHECK(contains(f, "complete -c agentctl -n \"__agentctl_at 'create'\" -l allow-lan -d"));
    CHECK(contains(f, "complete -c agentctl -l provider -r -a 'incus lima hyperv'"));
    CHECK(contains(f, "complete -c agentctl -l output -l format -s o -r -a 'table json'"));
    // Values: files where files go, names from agentctl itself, catalog words.
    CHECK(contains(f, "-n \"__agentctl_at 'create'\" -l allow-file -r -F"));
    CHECK(contains(f, "-n \"__agentctl_at 'create'\" -l agent -r -a 'claude"));
    CHECK(contains(f, "-n \"__agentctl_at 'stop'\" -a '(agentctl __complete sandboxes 2>/dev/null)'\n"));
    CHECK(contains(f, "-n \"__agentctl_at 'profile show'\" -a '(agentctl __complete profiles 2>/dev/null)'\n"));
    // Nested commands: `profile list` is not offered again after `profile list`.
    CHECK(contains(f, "-n \"__agentctl_at 'profile'\" -a list"));
    CHECK(contains(f, "case '|delete' '|rm'\n            echo delete\n"));
    CHECK_FALSE(contains(f, "egress-proxy"));
    CHECK_FALSE(contains(f, "__fish_seen_subcommand_from"));

    for (const char* shell : {"zsh", "fish"}) {
        if (!std::filesystem::exists(std::string("/usr/bin/") + shell)) {
            WARN("not syntax-checked: " << shell << " is not installed");
            continue;
        }
        const auto script = cli.home() / (std::string("agentctl.") + shell);
        cli.write(script, std::string(shell) == "zsh" ? zsh.out : fish.out);
        auto runner = agentctl::make_real_process_runner();
        agentctl::ProcessRequest request;
        request.argv = {shell, "-n", script.string()};
        auto r = runner->run(request);
        INFO(r.err);
        CHECK(r.exit_code == 0);
    }
}

TEST_CASE("fish completes commands, nested commands and values with the generated script") {
    if (!std::filesystem::exists("/usr/bin/fish")) {
        WARN("not run: fish is not installed");
        return;
    }
    CliSandbox cli;
    auto fish = cli.run({"completion", "fish"});
    REQUIRE(fish.exit_code == 0);
    const auto script = cli.home() / "agentctl.fish";
    cli.write(script, fish.out);
    cli.write(cli.home() / "allow-list.txt", "example.com\n");
    // Only the completion words (fish prints WORD<TAB>DESCRIPTION).
    auto complete = [&](const std::string& line) {
        auto runner = agentctl::make_real_process_runner();
        agentctl::ProcessRequest request;
        request.argv = {"fish",
                        "--no-config",
                        "-c",
                        "source $argv[1]; complete -C $argv[2] | string replace -r '\\t.*' ''",
                        script.string(),
                        line};
        const auto bin_dir = std::filesystem::path(agentctl::test::agentctl_binary()).parent_path().string();
        request.env = {{"HOME", cli.home().string()},
                       {"XDG_CONFIG_HOME", (cli.home() / ".config").string()},
                       {"AGENTCTL_ORG_DIR", cli.org_dir().string()},
                       {"PATH", bin_dir + ":/usr/bin:/bin"}};
        request.cwd = cli.home().string();
        auto r = runner->run(request);
        INFO(r.err);
        return r.out;
    };
    CHECK(complete("agentctl cre") == "create\n");
    CHECK(complete("agentctl profile pr") == "presets\n");
    // Once `profile list` is typed, the profile subcommands are not offered again.
    CHECK_FALSE(contains(complete("agentctl profile list "), "presets"));
    CHECK(complete("agentctl profile show stri") == "strict\n");
    CHECK(complete("agentctl create tbox --agent cl") == "claude\n");
    CHECK(complete("agentctl --provider hy") == "hyperv\n");
    CHECK(complete("agentctl create tbox --allow-file allow-l") == "allow-list.txt\n");
    CHECK(complete("agentctl completion f") == "fish\n");
    CHECK(complete("agentctl egress") == "");
}

TEST_CASE("an unknown shell is refused") {
    CliSandbox cli;
    auto r = cli.run({"completion", "tcsh"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("agentctl: SHELL: tcsh not in {bash,zsh,fish}") == 0);
}
