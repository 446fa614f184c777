#include <sys/utsname.h>

#include "agentctl/provider.hpp"

namespace agentctl {
namespace {

class RealHostPlatform final : public HostPlatform {
public:
    [[nodiscard]] bool is_macos() const override {
        struct utsname info {};
        return ::uname(&info) == 0 && std::string_view(info.sysname) == "Darwin";
    }
    [[nodiscard]] std::string sandbox_exec_path() const override { return "/usr/bin/sandbox-exec"; }
};

}  // namespace

std::unique_ptr<HostPlatform> make_real_host_platform() { return std::make_unique<RealHostPlatform>(); }

}  // namespace agentctl
