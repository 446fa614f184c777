#include "provider/common/agent_install.hpp"

#include <fmt/format.h>

#include "policy/catalog.hpp"
#include "provider/common/command_output.hpp"

namespace agentctl::provider::common {

std::string agent_install_command(std::string_view agent) {
    return std::string(policy::find_agent(agent).install_command);
}

Error agent_install_failed(std::string_view agent, std::string_view sandbox, int exit_code, std::string_view err) {
    // The install fetches through the egress proxy: a refused host is the usual cause.
    return Error(
        fmt::format("installing {} in \"{}\" failed (exit code {}): {}", agent, sandbox, exit_code, output_tail(err)),
        fmt::format("check `agentctl logs {0} --network` for refused hosts; `agentctl start {0}` retries the "
                    "install",
                    sandbox));
}

}  // namespace agentctl::provider::common
