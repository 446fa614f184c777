#include "cli_runner.hpp"

#include <cstdlib>
#include <algorithm>
#include <fstream>
#include <unistd.h>

#include "support/build_paths.hpp"

namespace agentctl::test {

CliSandbox::CliSandbox() : m_runner(make_real_process_runner()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "agentctl-cli-XXXXXX").string();
    m_root = ::mkdtemp(pattern.data());
    m_home = m_root / "home";
    std::filesystem::create_directories(m_home);
    std::filesystem::create_directories(org_dir());
}

CliSandbox::~CliSandbox() {
    std::error_code ec;
    std::filesystem::remove_all(m_root, ec);
}

ProcessResult CliSandbox::run(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env,
                              const std::string& input) {
    ProcessRequest request;
    request.stdin_data = input;
    request.argv = {agentctl::test::agentctl_binary()};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    request.env = {{"HOME", m_home.string()},
                   {"XDG_CONFIG_HOME", (m_home / ".config").string()},
                   {"AGENTCTL_ORG_DIR", org_dir().string()},
                   {"AGENTCTL_CONFIG", ""},
                   // Empty counts as unset: state and runtime files go below HOME.
                   {"XDG_STATE_HOME", ""},
                   {"XDG_RUNTIME_DIR", ""},
                   {"NO_COLOR", "1"}};
    for (const auto& [key, value] : extra_env) request.env[key] = value;
    request.cwd = m_home.string();
    request.timeout = std::chrono::seconds(60);
    return m_runner->run(request);
}

void CliSandbox::use_incus() const {
    write(config_file(), "provider: \"incus\"\nincus.subnetPool: \"10.222.0.0/16\"\n");
}

std::string incus_unavailable() {
    if (::geteuid() != 0) return "not root";
    for (const char* socket : {"/var/lib/incus/unix.socket", "/run/incus/unix.socket"}) {
        if (std::filesystem::exists(socket)) return {};
    }
    return "no Incus daemon socket";
}

std::string tree_listing(const std::filesystem::path& root) {
    std::string out;
    std::error_code ec;
    if (!std::filesystem::exists(root)) return out;
    std::vector<std::string> lines;
    for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        std::string line = std::filesystem::relative(it->path(), root).string();
        if (it->is_regular_file(ec)) line += " " + std::to_string(it->file_size(ec));
        lines.push_back(line);
    }
    std::sort(lines.begin(), lines.end());
    for (const auto& line : lines) out += line + "\n";
    return out;
}

void CliSandbox::write(const std::filesystem::path& path, const std::string& content) const {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << content;
}

}  // namespace agentctl::test
