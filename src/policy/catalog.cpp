// The built-in tables: allow presets, agents and the package catalog.
#include "policy/catalog.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::policy {
namespace {

constexpr std::uint16_t k_https[] = {443};
constexpr std::uint16_t k_http_https[] = {80, 443};

constexpr std::string_view k_apt_hosts[] = {"archive.ubuntu.com", "security.ubuntu.com", "ports.ubuntu.com",
                                            "deb.debian.org", "security.debian.org"};
constexpr std::string_view k_apk_hosts[] = {"dl-cdn.alpinelinux.org"};
constexpr std::string_view k_pypi_hosts[] = {"pypi.org", "files.pythonhosted.org"};
constexpr std::string_view k_npm_hosts[] = {"registry.npmjs.org", "registry.yarnpkg.com"};
constexpr std::string_view k_github_hosts[] = {"github.com", "api.github.com", "codeload.github.com",
                                               "raw.githubusercontent.com", "release-assets.githubusercontent.com"};
constexpr std::string_view k_gitlab_hosts[] = {"gitlab.com"};

constexpr Preset k_presets[] = {
    {"apt", "Debian and Ubuntu package archives", k_apt_hosts, k_http_https},
    {"apk", "Alpine package archive", k_apk_hosts, k_https},
    {"pypi", "Python Package Index", k_pypi_hosts, k_https},
    {"npm", "npm and Yarn registries", k_npm_hosts, k_https},
    {"github", "GitHub (clone, API, raw files, release downloads)", k_github_hosts, k_https},
    {"gitlab", "GitLab.com", k_gitlab_hosts, k_https},
};

constexpr std::string_view k_claude_hosts[] = {"claude.ai", "downloads.claude.ai", "platform.claude.com",
                                               "api.anthropic.com", "statsig.anthropic.com"};
constexpr std::string_view k_codex_hosts[] = {"chatgpt.com", "releases.openai.com", "auth.openai.com",
                                              "api.openai.com"};
constexpr std::string_view k_opencode_hosts[] = {"opencode.ai", "github.com", "api.github.com",
                                                 "release-assets.githubusercontent.com", "models.opencode.ai"};
constexpr std::string_view k_pi_hosts[] = {"pi.dev", "registry.npmjs.org", "nodejs.org", "api.anthropic.com"};
constexpr std::string_view k_gemini_hosts[] = {"registry.npmjs.org", "generativelanguage.googleapis.com",
                                               "accounts.google.com", "oauth2.googleapis.com"};
constexpr std::string_view k_cursor_hosts[] = {"cursor.com", "api2.cursor.sh"};

constexpr std::string_view k_curl_bash[] = {"curl", "bash"};
constexpr std::string_view k_node_npm[] = {"node", "npm"};

constexpr Agent k_agents[] = {
    {"claude", "curl -fsSL https://claude.ai/install.sh | bash", "ANTHROPIC_API_KEY", k_claude_hosts, k_curl_bash,
     "claude", ""},
    {"codex", "curl -fsSL https://chatgpt.com/codex/install.sh | sh", "OPENAI_API_KEY", k_codex_hosts, k_curl_bash,
     "codex", ""},
    {"opencode", "curl -fsSL https://opencode.ai/install | bash", "", k_opencode_hosts, k_curl_bash, "opencode",
     ".opencode/bin"},
    {"pi", "curl -fsSL https://pi.dev/install.sh | sh", "ANTHROPIC_API_KEY", k_pi_hosts, k_curl_bash, "pi", ""},
    {"gemini", "npm install -g @google/gemini-cli", "GEMINI_API_KEY", k_gemini_hosts, k_node_npm, "gemini", ""},
    {"cursor", "curl https://cursor.com/install -fsS | bash", "CURSOR_API_KEY", k_cursor_hosts, k_curl_bash,
     "cursor-agent", ""},
};

// The secrets agents use, and where each belongs (docs/agents.md).
constexpr CredentialHost k_anthropic_keys[] = {{"api.anthropic.com", "x-api-key"}};
constexpr CredentialHost k_openai_keys[] = {{"api.openai.com", "authorization"}};
constexpr CredentialHost k_gemini_keys[] = {{"generativelanguage.googleapis.com", "x-goog-api-key"}};
constexpr CredentialHost k_github_keys[] = {{"api.github.com", "authorization"}, {"github.com", "authorization"}};
constexpr std::string_view k_anthropic_agents[] = {"claude", "pi"};
constexpr std::string_view k_openai_agents[] = {"codex"};
constexpr std::string_view k_gemini_agents[] = {"gemini"};
constexpr Credential k_credentials[] = {
    {"anthropic", "ANTHROPIC_API_KEY", k_anthropic_keys, k_anthropic_agents},
    {"openai", "OPENAI_API_KEY", k_openai_keys, k_openai_agents},
    {"gemini", "GEMINI_API_KEY", k_gemini_keys, k_gemini_agents},
    {"github", "GH_TOKEN", k_github_keys, {}},
};

constexpr PackageEntry k_packages[] = {
    {"build-essential", "build-essential", "gcc gcc-c++ make", "build-base"},
    {"ca-certificates", "ca-certificates", "ca-certificates", "ca-certificates"},
    {"curl", "curl", "curl", "curl"},
    {"dbus-x11", "dbus-x11", "dbus-x11", "dbus-x11"},
    {"dnsutils", "dnsutils", "bind-utils", "bind-tools"},
    {"file", "file", "file", "file"},
    {"fonts-dejavu", "fonts-dejavu", "dejavu-sans-fonts", "font-dejavu"},
    {"git", "git", "git", "git"},
    {"iproute2", "iproute2", "iproute", "iproute2"},
    {"jq", "jq", "jq", "jq"},
    {"less", "less", "less", "less"},
    {"make", "make", "make", "make"},
    {"nodejs", "nodejs", "nodejs", "nodejs"},
    {"npm", "npm", "npm", "npm"},
    {"openssh-client", "openssh-client", "openssh-clients", "openssh-client"},
    {"procps", "procps", "procps-ng", "procps"},
    {"python3", "python3", "python3", "python3"},
    {"python3-pip", "python3-pip", "python3-pip", "py3-pip"},
    {"python3-venv", "python3-venv", "python3", "python3"},
    {"ripgrep", "ripgrep", "ripgrep", "ripgrep"},
    {"shellcheck", "shellcheck", "ShellCheck", "shellcheck"},
    {"spice-vdagent", "spice-vdagent", "spice-vdagent", "spice-vdagent"},
    {"sudo", "sudo", "sudo", "sudo"},
    {"tmux", "tmux", "tmux", "tmux"},
    {"unzip", "unzip", "unzip", "unzip"},
    {"vim", "vim", "vim-enhanced", "vim"},
    {"wget", "wget", "wget", "wget"},
    {"xfce4", "xfce4", "xfce4-session xfwm4 xfce4-panel xfdesktop", "xfce4"},
    {"xorg", "xserver-xorg xinit", "xorg-x11-server-Xorg xorg-x11-xinit", "xorg-server xinit"},
    {"xterm", "xterm", "xterm", "xterm"},
    {"xz-utils", "xz-utils", "xz", "xz"},
};

template <typename Table>
std::string known_names(const Table& table) {
    std::string names;
    for (const auto& item : table) names += (names.empty() ? "" : ", ") + std::string(item.name);
    return names;
}

std::vector<AllowRule> host_rules(std::span<const std::string_view> hosts, std::span<const std::uint16_t> ports,
                                  const std::string& origin) {
    std::vector<AllowRule> rules;
    for (auto host : hosts) {
        AllowRule rule;
        rule.kind = HostKind::Name;
        rule.host = std::string(host);
        rule.ports.assign(ports.begin(), ports.end());
        rule.origin = origin;
        rules.push_back(std::move(rule));
    }
    return rules;
}

// The preset of that name; throws agentctl::Error naming the known ones.
const Preset& known_preset(std::string_view name) {
    const Preset* preset = find_preset(name);
    if (preset == nullptr) {
        throw Error(fmt::format("unknown allow preset \"{}\"", name),
                    fmt::format("known presets: {}; `agentctl profile presets` shows what each allows",
                                known_names(k_presets)));
    }
    return *preset;
}

}  // namespace

std::span<const Preset> presets() { return k_presets; }

const Preset* find_preset(std::string_view name) {
    for (const auto& preset : k_presets) {
        if (preset.name == name) return &preset;
    }
    return nullptr;
}

std::vector<AllowRule> expand_preset(std::string_view name) {
    const Preset& preset = known_preset(name);
    return host_rules(preset.hosts, preset.ports, fmt::format("preset {}", preset.name));
}

std::vector<std::string> preset_names(std::span<const std::string> comma_lists) {
    std::vector<std::string> names;
    for (const auto& list : comma_lists) {
        std::string_view rest = list;
        while (true) {
            auto comma = rest.find(',');
            std::string name(rest.substr(0, comma));
            if (name.empty()) {
                throw Error(fmt::format("--allow-preset \"{}\": empty preset name", list),
                            "write --allow-preset apt,pypi");
            }
            if (std::find(names.begin(), names.end(), name) == names.end()) {
                (void)known_preset(name);
                names.push_back(std::move(name));
            }
            if (comma == std::string_view::npos) break;
            rest.remove_prefix(comma + 1);
        }
    }
    return names;
}

std::vector<AllowRule> expand_presets(std::span<const std::string> comma_lists) {
    std::vector<AllowRule> rules;
    for (const auto& name : preset_names(comma_lists)) {
        auto expanded = expand_preset(name);
        rules.insert(rules.end(), expanded.begin(), expanded.end());
    }
    return rules;
}

std::span<const Agent> agents() { return k_agents; }

const Agent& find_agent(std::string_view name) {
    for (const auto& agent : k_agents) {
        if (agent.name == name) return agent;
    }
    throw Error(fmt::format("unknown agent \"{}\"", name), fmt::format("known agents: {}", known_names(k_agents)));
}

std::vector<AllowRule> agent_rules(const Agent& agent) {
    return host_rules(agent.hosts, k_https, fmt::format("agent {}", agent.name));
}

std::span<const Credential> credentials() { return k_credentials; }

const Credential* find_credential(std::string_view name) {
    for (const auto& credential : k_credentials) {
        if (credential.name == name) return &credential;
    }
    return nullptr;
}

const Credential* credential_for_agent(std::string_view agent) {
    for (const auto& credential : k_credentials) {
        if (std::find(credential.agents.begin(), credential.agents.end(), agent) != credential.agents.end())
            return &credential;
    }
    return nullptr;
}

std::string_view package_of_tool(std::string_view tool) { return tool == "node" ? "nodejs" : tool; }

std::span<const PackageEntry> package_catalog() { return k_packages; }

bool is_valid_package_name(std::string_view name) {
    if (name.empty() || name.size() > 128) return false;
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
    if (!alnum(name.front())) return false;
    return std::all_of(name.begin(), name.end(),
                       [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '+' || c == '-'; });
}

void check_package_name(std::string_view name) {
    if (!is_valid_package_name(name)) {
        throw Error(fmt::format("invalid package name \"{}\": a package name is a letter or digit followed by letters, "
                                "digits, '.', '_', '+' or '-' (at most 128 characters)",
                                name),
                    "`agentctl profile packages` lists the names agentctl translates per distribution");
    }
}

std::vector<std::string> package_names_for(std::string_view name, PackageManager manager) {
    std::string_view names = name;
    for (const auto& entry : k_packages) {
        if (entry.name != name) continue;
        names = manager == PackageManager::Apt ? entry.apt : manager == PackageManager::Dnf ? entry.dnf : entry.apk;
        break;
    }
    std::vector<std::string> out;
    while (!names.empty()) {
        auto space = names.find(' ');
        out.emplace_back(names.substr(0, space));
        if (space == std::string_view::npos) break;
        names.remove_prefix(space + 1);
    }
    return out;
}

}  // namespace agentctl::policy
