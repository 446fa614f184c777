// Whether a host process is the init of an Incus container on this machine,
// read from /proc alone: what lets status recognise the init it verified
// without asking Incus for the instance's state (which Incus gathers from
// inside the container, the slowest part of its answer).
#pragma once

#include <string>
#include <string_view>

namespace agentctl::provider::incus {

// The cgroup Incus (through liblxc) puts container `instance` of `project`
// in: lxc.payload.PROJECT_INSTANCE, or lxc.payload.INSTANCE in the default
// project (`project` empty or "default").
[[nodiscard]] std::string container_cgroup(std::string_view project, std::string_view instance);

// True when process `pid` (under `proc_root`, /proc on a host) is pid 1 of a
// pid namespace one level below the host's (its NSpid is "PID 1") and lives
// in container_cgroup(project, instance) or below it. Nothing inside the
// container can make another process pass: its pid namespace has one pid 1,
// a nested namespace's init has three NSpid entries, and no process of the
// container can leave the container's cgroup.
[[nodiscard]] bool is_container_init(int pid, std::string_view project, std::string_view instance,
                                     const std::string& proc_root = "/proc");

}  // namespace agentctl::provider::incus
