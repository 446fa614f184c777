#include "provider/incus/network/host_resolver.hpp"

#include <fmt/format.h>

namespace agentctl::provider::incus {

std::vector<std::string> resolver_arguments(const std::string& dnsmasq, const ResolverSpec& spec) {
    std::vector<std::string> argv{
        dnsmasq,
        "--keep-in-foreground",
        "--conf-file=/dev/null",
        "--no-hosts",
        "--no-resolv",
        "--strict-order",
        "--bind-dynamic",
        "--interface=" + spec.bridge,
        "--except-interface=lo",
        "--user=",
        "--group=",
        "--log-facility=-",
        "--no-negcache",
        "--no-ident",  // no CHAOS version.bind / servers.bind answers (the upstreams it forwards to)
        // DHCP: the sandbox's one address, for as long as it wants it.
        fmt::format("--dhcp-range={0},{0},{1},infinite", spec.guest, spec.netmask),
        "--leasefile-ro",
        "--dhcp-authoritative",
        "--dhcp-rapid-commit",
        "--no-ping",
        "--quiet-dhcp",
        "--dhcp-option=option:router," + spec.gateway,
        "--dhcp-option=option:dns-server," + spec.gateway,
    };
    // DNS: the allowlist, everything else NXDOMAIN.
    for (const auto& server : spec.servers) argv.push_back("--server=" + server);
    if (spec.allowlist_only) argv.emplace_back("--address=/#/");
    return argv;
}

}  // namespace agentctl::provider::incus
