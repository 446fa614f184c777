// A test world for the lima provider on Linux: a temporary HOME with its own
// LIMA_HOME and agentctl config dir, the contract fakes of limactl and
// sandbox-exec (tests/fakes/) first on PATH, a HostPlatform that says macOS,
// the real process runner and the real agentctl binary as the egress proxy.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agentctl/provider.hpp"
#include "core/files.hpp"
#include "policy/profile_store.hpp"
#include "policy/sandbox_spec.hpp"
#include "provider/lima/lima_paths.hpp"
#include "provider/lima/lima_provider.hpp"
#include "provider/lima/proxy_process.hpp"
#include "support/build_paths.hpp"
#include "support/provider_context.hpp"

namespace lima_test {

namespace fs = std::filesystem;

inline std::string fakes_dir() { return std::string(agentctl::test::source_dir()) + "/tests/fakes"; }

class FakePlatform final : public agentctl::HostPlatform {
public:
    bool macos = true;
    std::string sandbox_exec = fakes_dir() + "/sandbox-exec";
    [[nodiscard]] bool is_macos() const override { return macos; }
    [[nodiscard]] std::string sandbox_exec_path() const override { return sandbox_exec; }
};

using agentctl::test::RecordingReporter;

// Sets an environment variable for the fixture's lifetime.
class ScopedEnv {
public:
    ScopedEnv(std::string key, const std::string& value) : m_key(std::move(key)) {
        if (const char* old = std::getenv(m_key.c_str())) m_old = old;
        ::setenv(m_key.c_str(), value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (m_old)
            ::setenv(m_key.c_str(), m_old->c_str(), 1);
        else
            ::unsetenv(m_key.c_str());
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    std::string m_key;
    std::optional<std::string> m_old;
};

class LimaWorld {
public:
    LimaWorld()
        : m_root(make_root()),
          m_home(m_root / "home"),
          m_env_home("HOME", m_home.string()),
          m_env_lima("LIMA_HOME", (m_home / ".lima").string()),
          // /usr/bin before the rest: the fakes' `env python3` should find the
          // system interpreter, not a slow version-manager shim.
          m_env_path("PATH",
                     fakes_dir() + ":/usr/bin:" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "/bin")),
          m_runner(agentctl::make_real_process_runner()),
          m_context{.runner = *m_runner,
                    .platform = platform,
                    .reporter = reporter,
                    .out = out,
                    .mount_checker = m_mount_checker,
                    .config_dir = (m_home / ".config" / "agentctl").string(),
                    .self_exe = agentctl::test::agentctl_binary(),
                    .state_dir = (m_home / ".local" / "state" / "agentctl").string(),
                    .runtime_dir = (m_home / ".local" / "state" / "agentctl" / "run").string()} {
        fs::create_directories(m_home / ".lima" / "_config");
        fs::create_directories(workspace());
    }

    ~LimaWorld() {
        // Stop every hostagent and proxy the test left running, then remove the world.
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(m_home / ".lima", ec)) {
            std::ifstream pid_file(entry.path() / "ha.pid");
            int pid = 0;
            if (pid_file >> pid && pid > 0) ::kill(pid, SIGKILL);
        }
        // The proxies' pid files, where the provider writes them (lima_paths.hpp).
        const auto& state_dir = m_context.state_dir;
        for (const auto& entry : fs::directory_iterator(agentctl::provider::lima::instances_dir(state_dir), ec)) {
            const auto name = entry.path().filename().string();
            agentctl::provider::lima::stop_proxy(agentctl::provider::lima::egress_pid_path(state_dir, name).string(),
                                                 std::chrono::milliseconds(500));
        }
        fs::remove_all(m_root, ec);
    }

    LimaWorld(const LimaWorld&) = delete;
    LimaWorld& operator=(const LimaWorld&) = delete;

    // Runs a command (e.g. the fake limactl directly, as a user would).
    agentctl::ProcessResult run(std::vector<std::string> argv) {
        agentctl::ProcessRequest request;
        request.argv = std::move(argv);
        request.timeout = std::chrono::seconds(60);
        return m_runner->run(request);
    }

    std::unique_ptr<agentctl::Provider> provider() { return agentctl::provider::lima::create(m_context); }
    agentctl::ProviderContext& context() { return m_context; }

    [[nodiscard]] fs::path home() const { return m_home; }
    [[nodiscard]] fs::path lima_home() const { return m_home / ".lima"; }
    [[nodiscard]] std::string state_dir() const { return m_context.state_dir; }
    [[nodiscard]] fs::path workspace() const { return m_home / "agentctl" / "workspaces" / "tbox"; }

    // lima.yaml of an instance as the fake wrote it (JSON is YAML).
    [[nodiscard]] nlohmann::json lima_yaml(const std::string& name) const {
        return nlohmann::json::parse(agentctl::core::read_file(lima_home() / name / "lima.yaml"));
    }
    [[nodiscard]] nlohmann::json state(const std::string& name) const {
        return nlohmann::json::parse(
            agentctl::core::read_file(agentctl::provider::lima::state_file_path(state_dir(), name)));
    }
    // ~/.lima/_config/default.yaml or override.yaml.
    void lima_config(const std::string& file, const nlohmann::json& doc) const {
        agentctl::core::write_file_atomic(lima_home() / "_config" / file, doc.dump());
    }
    // Every limactl call so far: {"argv": [...], "env": {...}}.
    [[nodiscard]] std::vector<nlohmann::json> calls() const {
        std::vector<nlohmann::json> result;
        std::ifstream in(lima_home() / "_fake" / "calls.jsonl");
        std::string line;
        while (std::getline(in, line)) result.push_back(nlohmann::json::parse(line));
        return result;
    }
    [[nodiscard]] std::vector<std::string> verbs() const {
        std::vector<std::string> result;
        for (const auto& c : calls()) result.push_back(c["argv"][0].get<std::string>());
        return result;
    }
    [[nodiscard]] std::string last_profile() const {
        std::string last;
        for (int n = 1;; ++n) {
            auto path = lima_home() / "_fake" / ("profile-" + std::to_string(n) + ".sb");
            if (!fs::exists(path)) return last;
            last = agentctl::core::read_file(path);
        }
    }
    void clear_output() {
        out.str("");
        reporter.lines.clear();
    }

    FakePlatform platform;
    RecordingReporter reporter;
    std::ostringstream out;

private:
    // The start-time mount check the CLI supplies, with this world's home.
    class WorldMountChecker final : public agentctl::MountChecker {
    public:
        explicit WorldMountChecker(const LimaWorld& world) : m_world(world) {}
        void recheck(const std::string& name, const std::vector<std::string>& profiles,
                     const std::vector<agentctl::Mount>& recorded) const override {
            agentctl::policy::Environment env;
            env.home = env.cwd = m_world.m_home.string();
            env.user_dir = (m_world.m_home / ".config" / "agentctl" / "profiles").string();
            env.org_dir = (m_world.m_home / "org-profiles").string();
            env.config_dir = m_world.m_context.config_dir;
            env.state_dir = m_world.m_context.state_dir;
            env.runtime_dir = m_world.m_context.runtime_dir;
            agentctl::policy::recheck_start_mounts(name, profiles, recorded, env);
        }

    private:
        const LimaWorld& m_world;
    };

    static fs::path make_root() {
        auto root = fs::temp_directory_path() /
                    ("agentctl-lima-" + std::to_string(::getpid()) + "-" + std::to_string(s_counter++));
        fs::remove_all(root);
        fs::create_directories(root);
        return fs::canonical(root);
    }
    static inline int s_counter = 0;

    fs::path m_root;
    fs::path m_home;
    ScopedEnv m_env_home;
    ScopedEnv m_env_lima;
    ScopedEnv m_env_path;
    std::unique_ptr<agentctl::ProcessRunner> m_runner;
    WorldMountChecker m_mount_checker{*this};
    agentctl::ProviderContext m_context;
};

}  // namespace lima_test
