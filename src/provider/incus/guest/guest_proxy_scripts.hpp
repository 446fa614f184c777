// What agentctl runs inside an Incus guest for its egress proxy: the proxy
// settings (for every user, incl. the tools that ignore the environment) and
// the confinement probe battery.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::provider::incus {

// `http://ADDRESS:PORT`.
[[nodiscard]] std::string proxy_url(const std::string& address, std::uint16_t port);

// The proxy environment every process in the guest gets (instance config
// `environment.*`, which Incus applies to the container's init and every
// `incus exec`): http(s)_proxy in both cases, no_proxy for loopback, npm's
// and pip's own variables.
[[nodiscard]] std::map<std::string, std::string> proxy_environment(const std::string& url);

// A POSIX sh script (run as root) that writes the same settings where login
// shells, PAM, apt, git, npm, pip and ssh look for them:
//   /etc/environment, /etc/profile.d/agentctl-proxy.sh, /etc/apt/apt.conf.d/
//   90agentctl-proxy, /etc/gitconfig (http.proxy), /etc/npmrc and
//   /usr/etc/npmrc, /etc/pip.conf, and /etc/ssh/ssh_config.d/
//   90-agentctl-proxy.conf with a ProxyCommand helper
//   /usr/local/bin/agentctl-connect (bash /dev/tcp, HTTP CONNECT) so that
//   `ssh host` reaches an allowlisted host:port through the proxy.
// It also points /etc/resolv.conf at the sandbox's resolver `resolver` (the
// bridge's host address), unless the file is a symlink (a local stub resolver).
// Idempotent: rerunning replaces agentctl's own lines and files only.
[[nodiscard]] std::string proxy_setup_script(const std::string& address, std::uint16_t port,
                                             const std::string& resolver);

// One script that runs `setup` (proxy_setup_script) in the background while
// `main` runs, then waits for it. Their output lines interleave. Both
// keep their own `set -eu`; the exit status is main's, or setup's when main
// succeeded.
[[nodiscard]] std::string with_proxy_setup(const std::string& main, const std::string& setup);

// The names of the battery's probes (the script prints them in any order).
[[nodiscard]] const std::vector<std::string>& probe_names();

struct ProbeTargets {
    std::string gateway;                    // the bridge's host address (the resolver)
    std::string proxy;                      // where the egress proxy listens (empty: the gateway)
    std::uint16_t proxy_port = 0;           // the egress proxy
    std::uint16_t gateway_canary = 0;       // a host port on the gateway agentctl listens on (must be refused);
                                            // 0: the server is not this machine, the probe is skipped
    std::string other_host_address;         // another address of the host (empty: probe skipped as held by design)
    std::uint16_t other_canary = 0;         // a port agentctl listens on there
    std::string unrouted = "198.51.100.7";  // TEST-NET-2: never routed, must be rejected at once
    bool dns_closed = false;                // network.dns.disabled: the gateway's port 53 must refuse
};

// The probe battery, run as root inside the guest, every probe concurrently,
// each bounded by `timeout_seconds`. The guest's proxy variables are unset
// first. Prints one line per probe: `agentctl-probe NAME held|escaped|inconclusive DETAIL`:
//   direct-bypass      TCP straight to UNROUTED:443, not through the proxy: must be rejected
//   host-port          TCP to GATEWAY:GATEWAY_CANARY (not the proxy): must be rejected
//                      (skipped without a canary: "skipped" lines are not counted)
//   host-address       TCP to another host address, OTHER:OTHER_CANARY: must be rejected
//   dns-tcp-elsewhere  TCP to OTHER:53 (Incus accepts 53 on every host address): must be rejected
//   dns-udp-elsewhere  a UDP DNS query to UNROUTED:53: must be rejected
//   proxy-denied-name  CONNECT to a name no policy allows, via the proxy (PROXY:PROXY_PORT): must get no tunnel
//                      (403; under --allow-lan names are looked up, and it fails with 502)
//   dns-denied-name    that name from the bridge's resolver: must get NXDOMAIN or REFUSED (with
//                      dns_closed: the query itself must be refused, no resolver answers)
[[nodiscard]] std::string probe_battery_script(const ProbeTargets& targets, int timeout_seconds);

}  // namespace agentctl::provider::incus
