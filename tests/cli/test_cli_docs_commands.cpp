// Every `agentctl ...` command in README.md and docs/*.md runs here, so the
// documentation cannot drift from the binary:
//   - a concrete command (no placeholder) must be in k_documented below, which
//     says how it runs: for real (against the Incus daemon where it changes
//     state), with --preview, or as a refusal this host must give; a concrete
//     command missing from the table fails the test, and so does a table entry
//     no document contains any more;
//   - a synopsis (NAME, KEY=VALUE, [KEY], a|b, ...) or a bare mention
//     (`agentctl status`) is checked against the command tree: every command
//     word exists and every --flag is in that command's help.
// The documented sandbox names become $AGENTCTL_DOCTEST_PREFIX + the name
// (default `doctest-`, a prefix scripts/incus/down.sh knows as the tests'), in
// previews too, which ask the daemon: a user's own `demo` is never looked at.
// Each sandbox made for real is deleted at the end even when a step fails.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "cli_runner.hpp"
#include "support/build_paths.hpp"

using agentctl::ProcessResult;
using agentctl::test::CliSandbox;
namespace fs = std::filesystem;

namespace {

struct DocCommand {
    std::string where;  // FILE:LINE
    std::string text;   // normalised: no prompt, no sudo, no trailing comment, one line
};

std::string fmt_where(const std::string& file, int line) { return file + ":" + std::to_string(line); }

std::string trim(std::string text) {
    auto first = text.find_first_not_of(" \t");
    if (first == std::string::npos) return {};
    auto last = text.find_last_not_of(" \t\r");
    return text.substr(first, last - first + 1);
}

// Removes a shell comment (` # ...` outside quotes).
std::string strip_comment(const std::string& line) {
    char quote = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
        char c = line[i];
        if (quote) {
            if (c == quote) quote = 0;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == '#' && i > 0 && (line[i - 1] == ' ' || line[i - 1] == '\t')) {
            return trim(line.substr(0, i));
        }
    }
    return trim(line);
}

std::string collapse_spaces(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == ' ' && !out.empty() && out.back() == ' ') continue;
        out += c;
    }
    return trim(out);
}

std::vector<fs::path> documents() {
    std::vector<fs::path> files{fs::path(agentctl::test::source_dir()) / "README.md"};
    std::vector<fs::path> docs;
    for (const auto& entry : fs::directory_iterator(fs::path(agentctl::test::source_dir()) / "docs")) {
        if (entry.path().extension() == ".md") docs.push_back(entry.path());
    }
    std::sort(docs.begin(), docs.end());
    files.insert(files.end(), docs.begin(), docs.end());
    return files;
}

// Code blocks: lines starting with `agentctl ` (after `$ ` or `sudo `), with
// `\` continuations joined. Prose: inline code spans starting with `agentctl `
// (or `sudo agentctl `).
std::vector<DocCommand> extract_commands() {
    std::vector<DocCommand> out;
    static const std::regex inline_code("`(?:sudo )?(agentctl [^`]*)`");
    for (const auto& file : documents()) {
        std::ifstream in(file);
        const auto name = fs::relative(file, agentctl::test::source_dir()).string();
        std::string line;
        int number = 0;
        bool in_block = false;
        while (std::getline(in, line)) {
            ++number;
            if (trim(line).starts_with("```")) {
                in_block = !in_block;
                continue;
            }
            if (!in_block) {
                for (std::sregex_iterator it(line.begin(), line.end(), inline_code), end; it != end; ++it) {
                    out.push_back({fmt_where(name, number), collapse_spaces((*it)[1].str())});
                }
                continue;
            }
            std::string text = trim(line);
            if (text.starts_with("$ ")) text = trim(text.substr(2));
            if (text.starts_with("sudo ")) text = trim(text.substr(5));
            if (!text.starts_with("agentctl ")) continue;
            const int first = number;
            while (!text.empty() && text.back() == '\\' && std::getline(in, line)) {
                ++number;
                text = text.substr(0, text.size() - 1) + " " + trim(line);
            }
            out.push_back({fmt_where(name, first), collapse_spaces(strip_comment(text))});
        }
    }
    return out;
}

// Shell-like words: single and double quotes group and are removed.
std::vector<std::string> words_of(const std::string& text) {
    std::vector<std::string> words;
    std::string current;
    bool have = false;
    char quote = 0;
    for (char c : text) {
        if (quote) {
            if (c == quote) {
                quote = 0;
            } else {
                current += c;
            }
        } else if (c == '\'' || c == '"') {
            quote = c;
            have = true;
        } else if (c == ' ') {
            if (have) words.push_back(current);
            current.clear();
            have = false;
        } else {
            current += c;
            have = true;
        }
    }
    if (have) words.push_back(current);
    return words;
}

// A word that stands for something: NAME, KEY=VALUE, [KEY], HOST:PORT, a|b, X..., ...
bool is_placeholder(const std::string& word) {
    static const std::regex caps(R"(^\[?[A-Z][A-Z0-9_]*([:=\[\]][A-Z0-9_\[\]]*)*(\.\.\.)?\]?$)");
    return word.find('|') != std::string::npos || word.find("...") != std::string::npos || word.starts_with("[") ||
           std::regex_match(word, caps);
}

// ---------------------------------------------------------------- the command tree

class Surface {
public:
    explicit Surface(CliSandbox& cli) : m_cli(cli) {}

    // The help text of `agentctl PATH... --help`; nullopt when that is not a command.
    const std::optional<std::string>& help(const std::vector<std::string>& path) {
        auto key = join(path);
        auto it = m_help.find(key);
        if (it != m_help.end()) return it->second;
        auto args = path;
        args.push_back("--help");
        auto r = m_cli.run(args);
        std::optional<std::string> text;
        if (r.exit_code == 0) text = r.out;
        return m_help.emplace(key, text).first->second;
    }

    // The subcommand names listed in PATH's help.
    std::set<std::string> subcommands(const std::vector<std::string>& path) {
        std::set<std::string> names;
        const auto& text = help(path);
        if (!text) return names;
        std::istringstream in(*text);
        std::string line;
        bool listing = false;
        while (std::getline(in, line)) {
            if (line.starts_with("Subcommands:")) {
                listing = true;
                continue;
            }
            if (listing) {
                if (line.empty() || line[0] != ' ') {
                    listing = false;
                    continue;
                }
                auto word = words_of(trim(line));
                if (!word.empty()) names.insert(word[0]);
            }
        }
        return names;
    }

    // Whether WORD is a command below PATH: listed in its help, or (hidden
    // commands such as egress-proxy) having a help of its own.
    bool is_command(const std::vector<std::string>& path, const std::string& word) {
        if (word.empty() || word.starts_with("-")) return false;
        if (subcommands(path).contains(word)) return true;
        auto longer = path;
        longer.push_back(word);
        const auto& own = help(longer);
        const auto& parent = help(path);
        return own && parent && *own != *parent;
    }

    static std::string join(const std::vector<std::string>& words) {
        std::string out;
        for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
        return out;
    }

private:
    CliSandbox& m_cli;
    std::map<std::string, std::optional<std::string>> m_help;
};

// Global options that take a value, as written before a command.
const std::set<std::string> k_global_with_value = {"--provider",    "--output",    "-o",      "--remote",
                                                   "--profile-dir", "--log-level", "--format"};

struct SurfaceCheck {
    std::vector<std::string> problems;
    bool only_commands = true;  // every word was a command (or a|b of commands): a bare mention
};

// Checks a synopsis or a mention against the command tree.
SurfaceCheck check_synopsis(Surface& surface, const std::vector<std::string>& words) {
    SurfaceCheck check;
    auto& problems = check.problems;
    std::vector<std::string> path;
    std::vector<std::string> flags;
    bool path_done = false;
    for (std::size_t i = 1; i < words.size(); ++i) {
        const auto& word = words[i];
        if (word == "--" || word == "|") {
            check.only_commands = false;
            break;
        }
        if (word.starts_with("-")) {
            check.only_commands = false;
            flags.push_back(word.substr(0, word.find('=')));
            if (!path_done && path.empty() && k_global_with_value.contains(word) && i + 1 < words.size()) ++i;
            continue;
        }
        if (path_done) {
            check.only_commands = false;
            continue;
        }
        // `a|b|c` or `add/remove`: alternatives, each must be a command.
        const char separator =
            word.find('|') != std::string::npos ? '|' : (word.find('/') != std::string::npos ? '/' : '\0');
        if (separator != 0) {
            std::vector<std::string> alternatives;
            std::stringstream s(word);
            std::string part;
            while (std::getline(s, part, separator)) alternatives.push_back(part);
            const bool all_commands = std::all_of(alternatives.begin(), alternatives.end(),
                                                  [&](const std::string& a) { return surface.is_command(path, a); });
            if (all_commands) {
                for (const auto& a : alternatives) {
                    auto one = path;
                    one.push_back(a);
                    if (!surface.help(one)) problems.push_back("no command `agentctl " + Surface::join(one) + "`");
                }
                path_done = true;
                continue;
            }
        }
        if (surface.is_command(path, word)) {
            path.push_back(word);
        } else {
            path_done = true;
            check.only_commands = false;
        }
    }
    const auto& text = surface.help(path);
    if (!text) {
        problems.push_back("no command `agentctl " + Surface::join(path) + "`");
        return check;
    }
    const auto& top = surface.help({});
    for (const auto& flag : flags) {
        if (!flag.starts_with("--")) continue;
        const auto pattern = std::regex("(^|[ ,])" + flag + "([ ,=]|$)", std::regex::multiline);
        const bool here = std::regex_search(*text, pattern);
        const bool global = top && std::regex_search(*top, pattern);
        if (!here && !global) problems.push_back("`agentctl " + Surface::join(path) + "` has no option " + flag);
    }
    return check;
}

// ---------------------------------------------------------------- concrete commands

enum class Mode {
    Run,      // run as written (for real; in an Incus scenario against the daemon)
    Preview,  // run with --preview (interactive commands, or what cannot run here)
    Refused,  // run as written; this host must refuse it with the expected exit code
    Surface,  // a fragment in prose: only checked against the command tree
    Setup,    // not from the docs: what the docs assume was done before (setup.sh)
};

struct Entry {
    const char* scenario;  // entries of one scenario share a HOME and config, in table order
    Mode mode;
    const char* command;            // as documented (normalised)
    std::vector<int> exits = {0};   // accepted exit codes
    const char* out = nullptr;      // expected stdout, when the docs say it
    const char* err_has = nullptr;  // text stderr must contain
    // Installs an agent: run for real against the offline agent origin when it
    // runs here (else a Run becomes a Preview and a Setup is left out).
    bool needs_origin = false;
};

// Scenarios: "readme" and "quickstart" create real sandboxes on Incus (this
// machine runs containers only, so the scenario's default profile asks for
// container isolation — the setup step a VM-less host needs); "agent" installs
// claude for real from the offline agent origin (integration/incus/
// agent_origin.sh: the installer's hosts served from a test namespace through
// the sandbox's own proxy, an image that trusts its certificate), and where
// that cannot run, computes the sandbox with --preview; "lima" runs on Linux,
// where Lima must refuse; "plain" needs no backend.
const std::vector<Entry> k_documented = {
    {"readme", Mode::Run, "agentctl config set provider=incus"},
    {"readme", Mode::Run, "agentctl create demo --allow api.github.com:443 --allow-preset apt"},
    {"readme", Mode::Run, "agentctl exec demo -- whoami", {0}, "agent\n"},
    {"readme", Mode::Run, "agentctl exec --root demo -- whoami", {0}, "root\n"},
    {"readme", Mode::Run, "agentctl policy check demo example.com:443", {4}},
    {"readme", Mode::Run, "agentctl policy add demo example.com:443"},
    {"readme", Mode::Run, "agentctl status demo"},
    {"readme", Mode::Preview, "agentctl shell demo"},
    {"readme", Mode::Run, "agentctl delete demo --force"},

    {"quickstart", Mode::Setup, "agentctl config set provider=incus"},
    {"quickstart", Mode::Setup, "agentctl create demo --isolation container --mount-none"},  // as setup.sh
    {"quickstart", Mode::Run, "agentctl status demo"},
    {"quickstart", Mode::Run, "agentctl exec demo -- id"},
    {"quickstart", Mode::Preview, "agentctl shell demo"},
    {"quickstart", Mode::Run, "agentctl policy check demo deb.debian.org:80", {4}},
    {"quickstart", Mode::Run, "agentctl policy add demo deb.debian.org:80"},
    {"quickstart", Mode::Run, "agentctl delete demo --force"},

    // docs/remote.md: no incus client configuration here, so the remote is unknown.
    {"remote", Mode::Setup, "agentctl config set provider=incus"},
    {"remote", Mode::Refused, "agentctl --remote build list", {1}, nullptr, "unknown Incus remote \"build\""},
    {"remote", Mode::Run, "agentctl config set incus.remote=build"},
    {"agent", Mode::Setup, "agentctl config set provider=incus"},
    {"agent",
     Mode::Run,
     "agentctl create work --agent claude --mount ~/src/app:/workspace:w",
     {0},
     nullptr,
     "replaces the mount of",
     true},
    {"agent",
     Mode::Setup,
     "agentctl exec work -- claude --version",
     {0},
     "claude 9.9.9 (agentctl test stand-in)\n",
     nullptr,
     true},
    {"agent", Mode::Setup, "agentctl exec work -- id -u", {0}, "1500\n", nullptr, true},
    {"agent", Mode::Surface, "agentctl status work"},
    {"agent", Mode::Preview, "agentctl image build agentctl-debian-12", {0}},
    {"agent", Mode::Run, "agentctl --preview create demo --allow pypi.org:443"},

    {"lima", Mode::Run, "agentctl config set provider=lima"},
    {"lima", Mode::Refused, "agentctl create test --image template://ubuntu-lts --allow example.com:443", {2}},
    // create was refused, so there is nothing to start or exec into.
    {"lima", Mode::Refused, "agentctl start test", {1}, nullptr, "no Lima sandbox named"},
    {"lima",
     Mode::Refused,
     "agentctl exec test -- curl -fsS -o /dev/null https://example.com",
     {1},
     nullptr,
     "no Lima sandbox named"},

    {"plain", Mode::Run, "agentctl policy check --profile default --allow '*.example.com:443' api.example.com", {0, 5}},
    {"plain",
     Mode::Run,
     "agentctl --provider hyperv --preview --force-partial create demo --image 'C:\\Images\\ubuntu-24.04.vhdx' "
     "--allow api.github.com:443 --mount ~/src/demo:/workspace --port 8080:80",
     {0},
     nullptr,
     "replaces the mount of"},
    {"plain", Mode::Run, "agentctl --provider hyperv --preview start demo"},
    {"plain", Mode::Run, "agentctl --provider hyperv --preview stop demo --timeout 30"},
    {"plain", Mode::Run, "agentctl --provider hyperv --preview delete demo --force"},
    {"plain", Mode::Run, "agentctl --version"},  // docs/benchmarks.md: timed for start-up
    {"plain", Mode::Run, "agentctl config set profileDir=/opt/corp/agentctl-profiles"},
    {"plain", Mode::Run, "agentctl config set incus.project=agents"},
    {"plain", Mode::Run, "agentctl config set incus.pool.size=2"},
    {"plain", Mode::Surface, "agentctl exec -- true"},
    {"plain", Mode::Surface, "agentctl cp ./src NAME:/workspace"},
    {"plain", Mode::Surface, "agentctl cp NAME:/workspace/out ./out"},
    {"plain", Mode::Surface, "agentctl create a b c"},
    {"plain", Mode::Surface, "agentctl create --count 3 work"},
};

const std::set<std::string> k_sandbox_names = {"demo", "work", "test"};

std::string prefix() {
    const char* p = std::getenv("AGENTCTL_DOCTEST_PREFIX");
    return p && *p ? p : "doctest-";
}

bool incus_reachable() {
    for (const char* socket : {"/var/lib/incus/unix.socket", "/run/incus/unix.socket"}) {
        if (::access(socket, W_OK) == 0) return true;
    }
    return false;
}

// The offline agent origin (integration/incus/agent_origin.sh) for the agent
// scenario: the image that trusts it and the proxies' resolve file.
struct AgentOrigin {
    fs::path dir;
    std::string image;
    std::string resolve_file;
};

ProcessResult agent_origin_script(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"bash", (fs::path(agentctl::test::source_dir()) / "integration/incus/agent_origin.sh").string()});
    agentctl::ProcessRequest request;
    request.argv = std::move(args);
    request.timeout = std::chrono::minutes(5);
    return agentctl::make_real_process_runner()->run(request);
}

// Starts it in DIR; nullopt when this host cannot run it (not root, no
// network namespaces, no python3 or openssl), which the test says.
std::optional<AgentOrigin> start_agent_origin(const fs::path& dir) {
    const char* base = std::getenv("AGENTCTL_INCUS_IMAGE");
    auto r = agent_origin_script(
        {"up", dir.string(), base && *base ? base : "agentctl-debian-12", std::to_string(::getpid())});
    if (r.exit_code == 77) return std::nullopt;
    std::ifstream log(dir / "origin.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    INFO("agent_origin.sh up: exit " << r.exit_code << "\n" << r.err << text);
    REQUIRE(r.ok());
    AgentOrigin origin{dir, {}, {}};
    std::istringstream(r.out) >> origin.image >> origin.resolve_file;
    REQUIRE(!origin.resolve_file.empty());
    return origin;
}

struct Scenario {
    std::unique_ptr<CliSandbox> cli;
    std::set<std::string> created;  // real sandbox names, deleted at the end
};

std::vector<std::string> runnable(const Entry& entry, const std::string& scenario_prefix) {
    auto words = words_of(entry.command);
    words.erase(words.begin());  // "agentctl"
    bool after_dashes = false;
    for (auto& word : words) {
        if (word == "--") after_dashes = true;
        // Previews too: a preview asks the daemon, where a user's sandbox may have the documented name.
        if (!after_dashes && k_sandbox_names.contains(word)) word = scenario_prefix + word;
    }
    if (entry.mode == Mode::Preview) words.insert(words.begin(), "--preview");
    return words;
}

}  // namespace

TEST_CASE("every agentctl command in README.md and docs/ runs") {
    const auto documented = extract_commands();
    REQUIRE(documented.size() > 50);

    CliSandbox surface_cli;
    Surface surface(surface_cli);

    // 1. Coverage: every concrete command is in the table; every table entry is documented.
    std::set<std::string> table;
    for (const auto& entry : k_documented) {
        if (entry.mode != Mode::Setup) table.insert(entry.command);
    }
    std::set<std::string> seen;
    for (const auto& command : documented) {
        const auto words = words_of(command.text);
        const bool synopsis = std::any_of(words.begin() + 1, words.end(), is_placeholder);
        INFO(command.where << ": " << command.text);
        if (table.contains(command.text)) {
            seen.insert(command.text);
            continue;
        }
        const auto check = check_synopsis(surface, words);
        for (const auto& problem : check.problems) FAIL_CHECK(problem);
        // Not a synopsis: then it must be a bare mention of a command (every word a command).
        if (!synopsis && !check.only_commands) {
            FAIL_CHECK(
                "a concrete command that no test runs: add it to k_documented in "
                "tests/cli/test_cli_docs_commands.cpp (how it runs: Run, Preview, Refused, Surface)");
        }
    }
    for (const auto& command : table) {
        INFO(command);
        CHECK(seen.contains(command));  // a table entry that no document contains any more
    }

    // 2. Running them, scenario by scenario.
    const bool incus = incus_reachable();
    if (!incus) WARN("no Incus daemon reachable: the readme and quickstart scenarios are not run");
    const std::string scenario_prefix = prefix() + std::to_string(::getpid()) + "-";
    std::map<std::string, Scenario> scenarios;
    std::optional<AgentOrigin> origin;
    auto cleanup = [&] {
        for (auto& [name, scenario] : scenarios) {
            for (const auto& sandbox : scenario.created) (void)scenario.cli->run({"delete", sandbox, "--force"});
        }
        if (origin) (void)agent_origin_script({"down", origin->dir.string()});
    };
    try {
        for (const auto& documented_entry : k_documented) {
            auto entry = documented_entry;
            const std::string name = entry.scenario;
            if (entry.needs_origin && !origin) {
                if (entry.mode == Mode::Setup) continue;
                entry.mode = Mode::Preview;
            }
            const bool real = name == "readme" || name == "quickstart" || (name == "agent" && origin);
            if (real && !incus) continue;
            auto& scenario = scenarios[name];
            if (!scenario.cli) {
                scenario.cli = std::make_unique<CliSandbox>();
                auto& cli = *scenario.cli;
                // Test networks come from a range of their own; a VM-less host needs containers.
                std::string config = "incus.subnetPool: \"10.221.0.0/16\"\n";
                if (name == "agent" && incus) {
                    origin = start_agent_origin(cli.root() / "agent-origin");
                    if (origin) {
                        config += "incus.image: \"" + origin->image + "\"\nincus.proxyResolveFile: \"" +
                                  origin->resolve_file + "\"\n";
                    } else {
                        WARN(
                            "the offline agent origin cannot run here (root, network namespaces): "
                            "the quickstart's agent example runs with --preview");
                    }
                }
                cli.write(cli.config_file(), config);
                // The agent scenario's previews ask the daemon too, and get its refusal of VMs.
                if (real || name == "agent") {
                    cli.write(
                        cli.home() / ".config/agentctl/profiles/default.yaml",
                        "apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  isolation: container\n"
                        "  network:\n    denyLAN: true\n  mounts:\n    - hostPath: ~/agentctl/workspaces/{{.Name}}\n"
                        "      guestPath: /workspace\n      writable: true\n  mountPolicy:\n"
                        "    createMissing: true\n");
                }
                fs::create_directories(cli.home() / "src/app");
                fs::create_directories(cli.home() / "src/demo");
                // Writable mounts go to their owner, never to host root (this runs as root).
                for (const auto* dir : {"src/app", "src/demo"}) {
                    if (::geteuid() == 0) REQUIRE(::chown((cli.home() / dir).c_str(), 1500, 1500) == 0);
                }
            }
            if (entry.mode == Mode::Surface) {
                for (const auto& problem : check_synopsis(surface, words_of(entry.command)).problems) {
                    FAIL_CHECK(problem);
                }
                continue;
            }
            const auto args = runnable(entry, scenario_prefix);
            if (real && args.size() >= 2 && args[0] == "create") scenario.created.insert(args[1]);
            if (real && args.size() >= 2 && args[0] == "delete") scenario.created.erase(args[1]);
            auto r = scenario.cli->run(args);
            INFO("[" << name << "] agentctl " << Surface::join(args) << "\nexit " << r.exit_code << "\nstdout:\n"
                     << r.out << "\nstderr:\n"
                     << r.err);
            CHECK(std::find(entry.exits.begin(), entry.exits.end(), r.exit_code) != entry.exits.end());
            if (entry.out) CHECK(r.out == entry.out);
            if (entry.err_has) CHECK(r.err.find(entry.err_has) != std::string::npos);
        }
    } catch (...) {
        cleanup();
        throw;
    }
    cleanup();
}
