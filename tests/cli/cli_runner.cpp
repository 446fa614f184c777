#include "cli_runner.hpp"

#include <cstdlib>
#include <fstream>

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

ProcessResult CliSandbox::run(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env) {
    ProcessRequest request;
    request.argv = {AGENTCTL_BINARY};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    request.env = {{"HOME", m_home.string()},
                   {"XDG_CONFIG_HOME", (m_home / ".config").string()},
                   {"AGENTCTL_ORG_DIR", org_dir().string()},
                   {"AGENTCTL_CONFIG", ""},
                   {"NO_COLOR", "1"}};
    for (const auto& [key, value] : extra_env) request.env[key] = value;
    request.cwd = m_home.string();
    request.timeout = std::chrono::seconds(60);
    return m_runner->run(request);
}

void CliSandbox::write(const std::filesystem::path& path, const std::string& content) const {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << content;
}

}  // namespace agentctl::test
