#include "provider/incus/provisioning.hpp"

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::provider::incus {

std::string agent_install_command(const std::string& name) {
    // The install commands of the agent table (docs/agents.md).
    if (name == "claude") return "curl -fsSL https://claude.ai/install.sh | bash";
    if (name == "codex") return "curl -fsSL https://chatgpt.com/codex/install.sh | sh";
    if (name == "opencode") return "curl -fsSL https://opencode.ai/install | bash";
    if (name == "pi") return "curl -fsSL https://pi.dev/install.sh | sh";
    if (name == "gemini") return "npm install -g @google/gemini-cli";
    if (name == "cursor") return "curl https://cursor.com/install -fsS | bash";
    throw Error(fmt::format("unknown agent \"{}\"", name), "known agents: claude codex opencode pi gemini cursor");
}

std::vector<std::string> guest_package_names(const std::vector<std::string>& neutral, const std::string& manager) {
    std::vector<std::string> names;
    for (const auto& n : neutral) {
        std::string mapped = n;
        if (manager == "dnf") {
            if (n == "openssh-client") mapped = "openssh-clients";
            if (n == "procps") mapped = "procps-ng";
            if (n == "shellcheck") mapped = "ShellCheck";
        }
        names.push_back(mapped);
    }
    return names;
}

std::vector<std::string> package_source_entries() {
    return {"deb.debian.org:80,443",  "security.debian.org:80,443", "archive.ubuntu.com:80,443",
            "security.ubuntu.com:80,443", "ports.ubuntu.com:80,443", "dl-cdn.alpinelinux.org:443"};
}

}  // namespace agentctl::provider::incus
