// Runs the built agentctl binary with an isolated HOME, config and
// organisation directory, and returns what it printed and its exit code.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "agentctl/process.hpp"

namespace agentctl::test {

class CliSandbox {
public:
    CliSandbox();
    ~CliSandbox();
    CliSandbox(const CliSandbox&) = delete;
    CliSandbox& operator=(const CliSandbox&) = delete;

    // Runs `agentctl ARGS...`; the environment is HOME, XDG_CONFIG_HOME and
    // AGENTCTL_ORG_DIR inside this sandbox plus `extra_env`; `input` is its stdin.
    ProcessResult run(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env = {},
                      const std::string& input = {});

    [[nodiscard]] const std::filesystem::path& home() const { return m_home; }
    [[nodiscard]] std::filesystem::path config_file() const { return m_home / ".config/agentctl/config.yaml"; }
    [[nodiscard]] std::filesystem::path org_dir() const { return m_root / "org"; }

    void write(const std::filesystem::path& path, const std::string& content) const;

    // Configures the incus provider with a subnet pool of these tests' own
    // (10.222.0.0/16), so their bridges never collide with other suites'.
    void use_incus() const;

    [[nodiscard]] const std::filesystem::path& root() const { return m_root; }

private:
    std::filesystem::path m_root;
    std::filesystem::path m_home;
    std::unique_ptr<ProcessRunner> m_runner;
};

// Empty when a real Incus daemon can be used; otherwise why not (the test
// then says so and checks nothing more).
[[nodiscard]] std::string incus_unavailable();

// Every path below `root` (with file sizes), sorted: compare two listings to
// prove a command changed nothing on disk.
[[nodiscard]] std::string tree_listing(const std::filesystem::path& root);

}  // namespace agentctl::test
