// Presets, agents and the package catalog exactly as the reference lists them.
#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "policy/catalog.hpp"

using namespace agentctl;
using namespace agentctl::policy;

namespace {

std::vector<std::string> entries(const std::vector<AllowRule>& rules) {
    std::vector<std::string> out;
    for (const auto& rule : rules) out.push_back(rule.entry());
    return out;
}

}  // namespace

TEST_CASE("presets expand to exactly their hosts", "[catalog][presets]") {
    CHECK(entries(expand_preset("apt")) ==
          std::vector<std::string>{"archive.ubuntu.com:80,443", "security.ubuntu.com:80,443", "ports.ubuntu.com:80,443",
                                   "deb.debian.org:80,443", "security.debian.org:80,443"});
    CHECK(entries(expand_preset("apk")) == std::vector<std::string>{"dl-cdn.alpinelinux.org:443"});
    CHECK(entries(expand_preset("pypi")) == std::vector<std::string>{"pypi.org:443", "files.pythonhosted.org:443"});
    CHECK(entries(expand_preset("npm")) ==
          std::vector<std::string>{"registry.npmjs.org:443", "registry.yarnpkg.com:443"});
    CHECK(entries(expand_preset("github")) ==
          std::vector<std::string>{"github.com:443", "api.github.com:443", "codeload.github.com:443",
                                   "raw.githubusercontent.com:443", "release-assets.githubusercontent.com:443"});
    CHECK(entries(expand_preset("gitlab")) == std::vector<std::string>{"gitlab.com:443"});
    CHECK(expand_preset("pypi")[0].origin == "preset pypi");
    for (const auto& preset : presets()) {
        for (const auto& rule : expand_preset(preset.name)) CHECK(rule.kind == HostKind::Name);  // no wildcards
    }
    try {
        (void)expand_preset("docker");
        FAIL("no error");
    } catch (const Error& error) {
        CHECK(std::string(error.what()) == "unknown allow preset \"docker\"");
        CHECK(error.hint() ==
              "known presets: apt, apk, pypi, npm, github, gitlab; `agentctl profile presets` shows what each "
              "allows");
    }
}

TEST_CASE("--allow-preset takes comma lists and drops repeats", "[catalog][presets]") {
    std::vector<std::string> flags = {"pypi,npm", "pypi"};
    auto rules = expand_presets(flags);
    CHECK(entries(rules) == std::vector<std::string>{"pypi.org:443", "files.pythonhosted.org:443",
                                                     "registry.npmjs.org:443", "registry.yarnpkg.com:443"});
    std::vector<std::string> bad = {"pypi,"};
    CHECK_THROWS_WITH(expand_presets(bad), "--allow-preset \"pypi,\": empty preset name");
}

TEST_CASE("agents: install command, key variable and hosts on 443", "[catalog][agents]") {
    const auto& claude = find_agent("claude");
    CHECK(claude.install_command == "curl -fsSL https://claude.ai/install.sh | bash");
    CHECK(claude.key_env == "ANTHROPIC_API_KEY");
    CHECK(entries(agent_rules(claude)) == std::vector<std::string>{"claude.ai:443", "downloads.claude.ai:443",
                                                                   "platform.claude.com:443", "api.anthropic.com:443",
                                                                   "statsig.anthropic.com:443"});
    CHECK(agent_rules(claude)[0].origin == "agent claude");
    CHECK(find_agent("codex").install_command == "curl -fsSL https://chatgpt.com/codex/install.sh | sh");
    CHECK(find_agent("codex").key_env == "OPENAI_API_KEY");
    CHECK(entries(agent_rules(find_agent("codex"))) ==
          std::vector<std::string>{"chatgpt.com:443", "releases.openai.com:443", "auth.openai.com:443",
                                   "api.openai.com:443"});
    CHECK(find_agent("opencode").key_env.empty());
    CHECK(entries(agent_rules(find_agent("opencode"))) ==
          std::vector<std::string>{"opencode.ai:443", "github.com:443", "api.github.com:443",
                                   "release-assets.githubusercontent.com:443", "models.opencode.ai:443"});
    CHECK(find_agent("pi").install_command == "curl -fsSL https://pi.dev/install.sh | sh");
    CHECK(entries(agent_rules(find_agent("pi"))) ==
          std::vector<std::string>{"pi.dev:443", "registry.npmjs.org:443", "nodejs.org:443", "api.anthropic.com:443"});
    CHECK(find_agent("gemini").install_command == "npm install -g @google/gemini-cli");
    CHECK(find_agent("gemini").key_env == "GEMINI_API_KEY");
    CHECK(entries(agent_rules(find_agent("gemini"))) ==
          std::vector<std::string>{"registry.npmjs.org:443", "generativelanguage.googleapis.com:443",
                                   "accounts.google.com:443", "oauth2.googleapis.com:443"});
    CHECK(find_agent("cursor").install_command == "curl https://cursor.com/install -fsS | bash");
    CHECK(find_agent("cursor").key_env == "CURSOR_API_KEY");
    CHECK(entries(agent_rules(find_agent("cursor"))) ==
          std::vector<std::string>{"cursor.com:443", "api2.cursor.sh:443"});
    CHECK(agents().size() == 6);
    CHECK_THROWS_WITH(find_agent("copilot"), "unknown agent \"copilot\"");
}

TEST_CASE("the package catalog maps neutral names per distribution", "[catalog][packages]") {
    CHECK(package_names_for("openssh-client", PackageManager::Dnf) == std::vector<std::string>{"openssh-clients"});
    CHECK(package_names_for("openssh-client", PackageManager::Apt) == std::vector<std::string>{"openssh-client"});
    CHECK(package_names_for("procps", PackageManager::Dnf) == std::vector<std::string>{"procps-ng"});
    CHECK(package_names_for("shellcheck", PackageManager::Dnf) == std::vector<std::string>{"ShellCheck"});
    CHECK(package_names_for("build-essential", PackageManager::Dnf) ==
          std::vector<std::string>{"gcc", "gcc-c++", "make"});
    CHECK(package_names_for("build-essential", PackageManager::Apk) == std::vector<std::string>{"build-base"});
    CHECK(package_names_for("python3-pip", PackageManager::Apk) == std::vector<std::string>{"py3-pip"});
    CHECK(package_names_for("htop", PackageManager::Dnf) == std::vector<std::string>{"htop"});  // passed through
}

TEST_CASE("package names are validated", "[catalog][packages]") {
    for (const char* good : {"git", "g++", "libstdc++6", "python3.11", "a", "Z9_x-y.z+"}) {
        INFO(good);
        CHECK(is_valid_package_name(good));
    }
    for (const char* bad : {"", "-git", ".x", "+x", "_x", "git;rm", "a b", "a/b", "$(x)", "pkg=1.0", "a\nb"}) {
        INFO(bad);
        CHECK_FALSE(is_valid_package_name(bad));
    }
    CHECK_FALSE(is_valid_package_name(std::string(129, 'a')));
    CHECK_THROWS_WITH(
        check_package_name("git;rm"),
        "invalid package name \"git;rm\": a package name is a letter or digit followed by letters, digits, '.', "
        "'_', '+' or '-' (at most 128 characters)");
}
