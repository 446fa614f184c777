// Only agentctl starts a sandbox container on this machine.
//
// agentctl's start-time checks (the mounts checked again from their canonical
// paths, the firewall table, the ACL, the proxy and the resolver brought up,
// the confinement probes) run in `agentctl start`. A plain `incus start`, an
// `incus restart`, or incusd restoring instances at boot would skip them. So
// every sandbox container carries an LXC pre-start hook (in raw.lxc) that
// refuses to start unless agentctl left a one-time pass for it: a file under
// agentctl's runtime directory, which the hook removes (so a pass is used up
// by the one start it was made for). Without the pass the container does not
// start, and Incus reports the hook's failure.
//
// VMs have no such hook: a VM started without agentctl is reported by status
// (the instance is not the one that was verified).
#pragma once

#include <string>
#include <string_view>

namespace agentctl::provider::incus {

// The pass file of sandbox `name` in Incus project `project` ("" = default),
// under `runtime_dir` (agentctl's): RUNTIME_DIR/start-pass/PROJECT_NAME.
[[nodiscard]] std::string start_pass_path(const std::string& runtime_dir, const std::string& project,
                                          const std::string& name);

// The raw.lxc line of the hook for `pass`.
[[nodiscard]] std::string start_gate_line(const std::string& pass);

// `raw_lxc` with agentctl's hook line for `pass` in place of any earlier one
// of agentctl's (other lines kept, in order).
[[nodiscard]] std::string with_start_gate(std::string_view raw_lxc, const std::string& pass);

// A pass for one start: written on construction, removed on destruction if
// the hook has not used it (the start failed, or never happened).
class StartPass {
public:
    // Throws agentctl::Error when the file cannot be written.
    explicit StartPass(std::string path);
    ~StartPass();
    StartPass(const StartPass&) = delete;
    StartPass& operator=(const StartPass&) = delete;
    // True when the hook took the pass (the file is gone).
    [[nodiscard]] bool used() const;

private:
    std::string m_path;
};

}  // namespace agentctl::provider::incus
