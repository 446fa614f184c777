// A ProviderContext over the real process runner and host platform, with the
// output and reporter a test reads: what every provider test builds first.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <string_view>
#include <utility>
#include <vector>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "agentctl/provider.hpp"

namespace agentctl::test {

struct ContextOptions {
    bool preview = false;
    std::map<std::string, std::string> settings = {};
};

// A directory of the test's own for the host-wide locks (ProviderContext::
// host_lock_dir), removed with it: a test never waits for or blocks a real
// agentctl on this machine.
class LockDir {
public:
    LockDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "agentctl-test-locks.XXXXXX").string();
        if (::mkdtemp(pattern.data()) != nullptr) m_path = pattern;
    }
    ~LockDir() {
        std::error_code ec;
        if (!m_path.empty()) std::filesystem::remove_all(m_path, ec);
    }
    LockDir(const LockDir&) = delete;
    LockDir& operator=(const LockDir&) = delete;
    [[nodiscard]] const std::string& path() const { return m_path; }

private:
    std::string m_path;
};

// A Reporter that keeps what it was told, one "step: ", "notice: " or
// "warning: " line each.
class RecordingReporter final : public Reporter {
public:
    void step(std::string_view m) override { lines.push_back("step: " + std::string(m)); }
    void notice(std::string_view m) override { lines.push_back("notice: " + std::string(m)); }
    void warning(std::string_view m) override { lines.push_back("warning: " + std::string(m)); }
    [[nodiscard]] std::string text() const {
        std::string all;
        for (const auto& line : lines) all += line + "\n";
        return all;
    }
    std::vector<std::string> lines;
};

// The start-time mount check of a test that boots nothing with recorded
// mounts: refuses every one, naming the sandbox, so a test that does boots
// nothing unchecked and must supply a real check (tests/fakes/lima_fixture.hpp).
class NoMountChecker final : public MountChecker {
public:
    void recheck(const std::string& name, const std::vector<std::string>& /*profiles*/,
                 const std::vector<Mount>& /*recorded*/) const override {
        throw Error("sandbox \"" + name + "\" has recorded mounts and this test checks none");
    }
};

template <typename ReporterType = RecordingReporter>
struct ProviderContextFixture {
    std::ostringstream out;
    ReporterType reporter;
    std::unique_ptr<ProcessRunner> runner = make_real_process_runner();
    std::unique_ptr<HostPlatform> platform = make_real_host_platform();
    LockDir locks;
    NoMountChecker mounts;
    ProviderContext context;

    explicit ProviderContextFixture(ContextOptions options = {})
        : context{.runner = *runner,
                  .platform = *platform,
                  .reporter = reporter,
                  .out = out,
                  .mount_checker = mounts,
                  .preview = options.preview,
                  .self_exe = "agentctl",
                  .settings = std::move(options.settings),
                  .host_lock_dir = locks.path()} {}
};

}  // namespace agentctl::test
