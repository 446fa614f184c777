// Pure builders for every limactl command line and yq expression agentctl
// uses. The real run and --preview both print/run exactly these vectors.
//
// Lima facts these follow (lima-vm/lima):
//  - `limactl create --name=N --tty=false [--set EXPR]... TEMPLATE` applies each
//    --set yq expression to the template before writing lima.yaml, and fails
//    with `instance "N" already exists` for an existing name
//    (cmd/limactl/start.go, pkg/instance/create.go).
//  - `limactl edit N --tty=false --set EXPR` rewrites lima.yaml of a stopped
//    instance ("Cannot edit a running instance"), never starts it without a tty
//    (cmd/limactl/edit.go). One --set per edit call: older releases take one.
//  - `limactl list N --json` prints one JSON object per line (cmd/limactl/list.go).
//  - `limactl shell N -- CMD...` runs CMD as the instance's default user over
//    SSH and exits with CMD's exit code (cmd/limactl/shell.go).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agentctl/sandbox.hpp"

namespace agentctl::provider::lima {

// Lima's address for the host as seen from the guest's user-mode network.
inline constexpr const char* k_host_gateway = "192.168.5.2";
inline constexpr const char* k_default_image = "template://ubuntu-lts";

// The settings start re-applies before every confined boot.
struct ConfinementSettings {
    std::uint16_t ssh_port = 0;
    std::uint16_t proxy_port = 0;  // 0: unrestricted (no proxy environment)
    bool dns_disabled = false;
};

// A yq value: a JSON string literal (yq reads JSON syntax).
[[nodiscard]] std::string yq_string(const std::string& value);
// A size in bytes as Lima's memory/disk string ("4GiB", "512MiB", "1000").
[[nodiscard]] std::string lima_size(std::uint64_t bytes);

// The guest's proxy environment, pointing at the host gateway.
[[nodiscard]] std::map<std::string, std::string> proxy_environment(std::uint16_t proxy_port);

// One expression per structured field of the request, then the forced fields,
// in a fixed order: cpus, memory, disk, mounts, ports, user, passwordless sudo
// (not for macOS guests), ssh forwarding, copyToHost, networks, ssh port,
// proxy environment, host resolver (only when dns is disabled).
[[nodiscard]] std::vector<std::string> create_expressions(const SandboxSpec& spec, const ConfinementSettings& settings);
// `.mounts = [] | .mounts += [...]`: the template's mounts replaced by these.
[[nodiscard]] std::string mounts_expression(const std::vector<Mount>& mounts);
// What start re-applies (one expression): no extra networks, the pinned SSH
// port, the proxy environment (+ host resolver off), and the mounts if given.
[[nodiscard]] std::string start_expression(const ConfinementSettings& settings, const std::vector<Mount>* mounts);

// True when the image is a macOS guest template (Lima leaves sudo alone there).
[[nodiscard]] bool is_macos_guest_image(const std::string& image);

[[nodiscard]] std::vector<std::string> limactl_create(const std::string& name, const std::string& image,
                                                      const std::vector<std::string>& expressions);
[[nodiscard]] std::vector<std::string> limactl_edit(const std::string& name, const std::string& expression);
[[nodiscard]] std::vector<std::string> limactl_list(const std::string& name);  // "" = every instance
[[nodiscard]] std::vector<std::string> limactl_start(const std::string& name);
[[nodiscard]] std::vector<std::string> limactl_stop(const std::string& name, bool force);
[[nodiscard]] std::vector<std::string> limactl_delete(const std::string& name);
[[nodiscard]] std::vector<std::string> limactl_shell(const std::string& name, const std::vector<std::string>& command);
// exec: the command, under `sudo -n` for root, in `workdir` when given
// (`limactl shell --workdir`). shell: a login shell, `sudo -i` for root.
[[nodiscard]] std::vector<std::string> exec_command(const std::string& name, const std::vector<std::string>& argv,
                                                    bool root, const std::string& workdir = {});
[[nodiscard]] std::vector<std::string> shell_command(const std::string& name, bool root);
// `sandbox-exec -p PROFILE limactl start --tty=false NAME`.
[[nodiscard]] std::vector<std::string> sandboxed(const std::string& sandbox_exec, const std::string& profile,
                                                 std::vector<std::string> command);

}  // namespace agentctl::provider::lima
