#include "provider/common/agent_install.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "agentctl/process.hpp"
#include "provider/common/command_output.hpp"

namespace agentctl::provider::common {
namespace {

constexpr int k_not_on_path = 10;
constexpr int k_version_failed = 11;
constexpr int k_login_shell_failed = 12;

bool contains(const std::vector<std::string>& list, std::string_view item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

std::vector<std::string> agent_install_argv(const policy::Agent& agent) {
    return {"bash", "-o", "pipefail", "-c", std::string(agent.install_command)};
}

std::string agent_tools_script(const policy::Agent& agent) {
    std::string tools;
    for (auto tool : agent.needs) tools.append(" ").append(shell_quote(std::string(tool)));
    return fmt::format(
        "rc=0; for t in{}; do command -v \"$t\" >/dev/null 2>&1 || {{ echo \"$t\"; rc=1; }}; done; "
        "exit $rc",
        tools);
}

std::vector<std::string> parse_missing_tools(std::string_view output) {
    std::vector<std::string> tools;
    std::istringstream lines{std::string(output)};
    std::string line;
    while (std::getline(lines, line)) {
        if (!line.empty()) tools.push_back(line);
    }
    return tools;
}

std::optional<std::vector<std::string>> tools_missing_from_image(const policy::Agent& agent,
                                                                 const std::optional<std::string>& image_packages,
                                                                 const std::vector<std::string>& extra_packages) {
    if (!image_packages) return std::nullopt;
    std::vector<std::string> carried;
    std::istringstream words(*image_packages);
    for (std::string word; words >> word;) carried.push_back(word);
    std::vector<std::string> missing;
    for (auto tool : agent.needs) {
        const auto package = policy::package_of_tool(tool);
        // bash is essential in every Debian system: never listed, always there.
        if (tool == "bash" || contains(extra_packages, package)) continue;
        const auto names = policy::package_names_for(package, policy::PackageManager::Apt);
        if (!std::all_of(names.begin(), names.end(), [&](const auto& name) { return contains(carried, name); })) {
            missing.emplace_back(tool);
        }
    }
    return missing;
}

std::string agent_check_script(const policy::Agent& agent) {
    return fmt::format(R"SH(bin={bin}
dir={dir}
if [ -n "$dir" ] && ! command -v "$bin" >/dev/null 2>&1 && [ -x "$HOME/$dir/$bin" ]; then
  mkdir -p "$HOME/.local/bin" && ln -sf "$HOME/$dir/$bin" "$HOME/.local/bin/$bin"
fi
command -v "$bin" >/dev/null 2>&1 || {{ echo "$bin is not on the PATH ($PATH)"; exit {not_on_path}; }}
out=$("$bin" --version 2>&1) || {{ printf '%s\n' "$out"; exit {version_failed}; }}
shell=$(getent passwd "$(id -u)" | cut -d: -f7)
[ -x "$shell" ] || shell=/bin/sh
env -i HOME="$HOME" USER="$USER" LOGNAME="$USER" TERM=dumb "$shell" -lc '"$0" --version' "$bin" >/dev/null 2>&1 ||
  {{ echo "$shell -l does not find $bin"; exit {login}; }}
printf '%s\n' "$out"
)SH",
                       fmt::arg("bin", shell_quote(std::string(agent.binary))),
                       fmt::arg("dir", shell_quote(std::string(agent.home_bin))),
                       fmt::arg("not_on_path", k_not_on_path), fmt::arg("version_failed", k_version_failed),
                       fmt::arg("login", k_login_shell_failed));
}

std::string agent_check_step(const policy::Agent& agent, int exit_code) {
    switch (exit_code) {
        case k_not_on_path: return fmt::format("finding {} on the sandbox user's PATH", agent.binary);
        case k_login_shell_failed: return fmt::format("running {} --version in a login shell", agent.binary);
        default: return fmt::format("running {} --version", agent.binary);
    }
}

Error agent_tools_missing(std::string_view agent, std::string_view where, const std::vector<std::string>& tools) {
    std::string packages;
    for (const auto& tool : tools) packages += fmt::format(" --package {}", policy::package_of_tool(tool));
    return Error(
        fmt::format("the installer of {} needs {}, which {} does not have", agent, fmt::join(tools, " and "), where),
        fmt::format("use an image that has {} (`agentctl image build NAME` builds agentctl's Debian image, "
                    "which carries curl, Node.js and npm), or install {} at create:{} --allow-preset apt",
                    tools.size() == 1 ? "it" : "them", tools.size() == 1 ? "it" : "them", packages));
}

Error agent_install_failed(std::string_view agent, std::string_view sandbox, std::string_view step, int exit_code,
                           std::string_view output, std::string_view retry_hint) {
    // The install fetches through the egress proxy: a refused host is the usual cause.
    return Error(fmt::format("installing {} in \"{}\" failed while {} (exit code {}): {}", agent, sandbox, step,
                             exit_code, output_tail(output)),
                 fmt::format("check `agentctl logs {} --network` for refused hosts; {}", sandbox, retry_hint));
}

}  // namespace agentctl::provider::common
