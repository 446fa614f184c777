#include "agentctl/sandbox.hpp"

#include <fmt/format.h>

namespace agentctl {

bool is_loopback_address(const std::string& address) {
    return address.starts_with("127.") || address == "::1" || address == "[::1]" || address == "localhost";
}

std::vector<std::string> widenings(const SandboxSpec& spec) {
    std::vector<std::string> out;
    if (!spec.network.enabled) {
        out.emplace_back("no network policy: egress is unrestricted (--no-network-policy)");
    } else if (spec.network.allow_lan) {
        out.emplace_back("LAN open: every private and link-local address is reachable on any port (--allow-lan)");
    }
    if (spec.network.enabled && spec.network.default_budget != 0) {
        for (const auto& rule : spec.network.allow) {
            if (rule.kind != policy::HostKind::Ip) continue;
            out.push_back(
                fmt::format("upload not counted: {} is an address, which the firewall admits without the "
                            "proxy, so the default upload budget does not cap it",
                            rule.host));
        }
    }
    for (const auto& mount : spec.mounts) {
        if (mount.writable) {
            out.push_back(fmt::format("writable mount: {} -> {} (the sandbox can change these host files)",
                                      mount.host_path, mount.guest_path));
        }
    }
    for (const auto& port : spec.ports) {
        if (!is_loopback_address(port.listen_address)) {
            out.push_back(
                fmt::format("published port on a non-loopback address: {}:{} -> {}/{} (other machines "
                            "can connect to it)",
                            port.listen_address, port.host_port, port.guest_port, port.protocol));
        }
    }
    if (spec.isolation == Isolation::Container) {
        out.emplace_back("container isolation: the sandbox shares the host kernel (--isolation container)");
    }
    return out;
}

}  // namespace agentctl
