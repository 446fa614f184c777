// The confinement probe battery of a container, made by agentctl itself from
// the host, inside the container's network namespace.
//
// The guest's programs play no part: no shell, no bash, no python3 of the
// guest's runs, so root inside cannot print "held" for a probe that would get
// out. Each probe is a socket agentctl opens on a thread that has entered the
// container's network namespace (setns), so its packets leave through the
// container's own interface and meet the bridge's ACL and agentctl's nft table
// exactly as the guest's would.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/unique_fd.hpp"
#include "provider/common/probes.hpp"
#include "provider/incus/guest/guest_proxy_scripts.hpp"

namespace agentctl::provider::incus {

// An open handle on a process's network namespace (/proc/PID/ns/net).
class NetnsHandle {
public:
    // Opens the namespace of `pid`. Throws agentctl::Error when it cannot be
    // opened, or when it is this process's own namespace (the pid is not a
    // container's: a probe from here would prove nothing).
    explicit NetnsHandle(int pid);
    [[nodiscard]] int fd() const { return m_fd.get(); }

private:
    core::UniqueFd m_fd;
};

// Makes every probe of probe_names() in `netns`, concurrently, each on a
// thread of its own, each attempt bounded by `timeout`; the probes of the
// proxy and the resolver retry a refused connection for up to 3 s more (they
// may still be coming up right after create). The verdicts and details are
// those of probe_battery_script(). Every probe name gets exactly one result.
[[nodiscard]] std::vector<common::ProbeResult> probe_in_namespace(const NetnsHandle& netns, const ProbeTargets& targets,
                                                                  std::chrono::milliseconds timeout);

}  // namespace agentctl::provider::incus
