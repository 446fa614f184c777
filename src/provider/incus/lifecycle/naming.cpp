#include "provider/incus/lifecycle/naming.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::provider::incus {

std::string bridge_name(std::string_view sandbox) {
    return fmt::format("{}{:011x}", k_bridge_prefix, fnv1a64(sandbox) & 0xfffffffffffULL);
}

std::string companion_name(std::string_view sandbox) { return std::string(sandbox) + "-egress"; }

std::string acl_name(std::string_view sandbox) { return fmt::format("agentctl-{}", sandbox); }

std::string mount_device_name(std::size_t index) { return fmt::format("agentctl-mount{}", index); }

std::string port_device_name(std::string_view protocol, unsigned host_port) {
    return fmt::format("agentctl-port-{}-{}", protocol, host_port);
}

bool is_mount_device(std::string_view device) { return device.starts_with("agentctl-mount"); }
bool is_port_device(std::string_view device) { return device.starts_with("agentctl-port-"); }

void check_sandbox_name(std::string_view sandbox) {
    const auto bad = [&](std::string_view why) {
        throw Error(fmt::format("invalid sandbox name \"{}\": {}", sandbox, why),
                    "use 1-54 characters of a-z, 0-9 and '-', starting with a letter, e.g. `my-agent`");
    };
    if (sandbox.empty()) bad("it is empty");
    // 63 is Incus's limit for instances; the ACL `agentctl-NAME` must fit too.
    if (sandbox.size() > 54) bad("it is longer than 54 characters");
    if (!(sandbox[0] >= 'a' && sandbox[0] <= 'z')) bad("it must start with a lower-case letter");
    if (sandbox.back() == '-') bad("it must not end with '-'");
    for (char c : sandbox) {
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
            bad(fmt::format("'{}' is not allowed", c));
        }
    }
}

}  // namespace agentctl::provider::incus
