// A ProviderContext over the real process runner and host platform, with the
// output and reporter a test reads: what every provider test builds first.
#pragma once

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "agentctl/process.hpp"
#include "agentctl/provider.hpp"

namespace agentctl::test {

struct ContextOptions {
    bool preview = false;
    std::map<std::string, std::string> settings = {};
};

template <typename ReporterType>
struct ProviderContextFixture {
    std::ostringstream out;
    ReporterType reporter;
    std::unique_ptr<ProcessRunner> runner = make_real_process_runner();
    std::unique_ptr<HostPlatform> platform = make_real_host_platform();
    ProviderContext context;

    explicit ProviderContextFixture(ContextOptions options = {})
        : context{.runner = *runner,
                  .platform = *platform,
                  .reporter = reporter,
                  .out = out,
                  .preview = options.preview,
                  .self_exe = "agentctl",
                  .settings = std::move(options.settings)} {}
};

}  // namespace agentctl::test
