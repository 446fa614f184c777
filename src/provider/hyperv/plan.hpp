// The hyperv provider's plans: the PowerShell scripts that would build, boot,
// stop, confine and remove a sandbox on a Hyper-V host, as pure functions of
// the sandbox spec. The provider prints them under --preview; the unit tests
// pin them. Nothing here runs anything.
//
// How a sandbox is laid out on the host:
//   - a Generation 2 VM named like the sandbox, its differencing disk and
//     configuration under <config dir>/hyperv/<name>;
//   - an Internal vSwitch `agentctl-<name>` of its own; the host's adapter on it
//     has 172.30.N.1/24 and the guest gets 172.30.N.2 (N from the name);
//   - one shared WinNAT `agentctl` over 172.30.0.0/16, because Windows allows
//     only one NAT network per host:
//     https://learn.microsoft.com/virtualization/hyper-v-on-windows/user-guide/setup-nat-network
//   - the network policy as extended port ACLs on the VM's adapter; host-side
//     Windows Firewall rules as a second wall between the guest and the host;
//   - host directories as SMB shares granted to one local account, and
//     published TCP ports as `netsh interface portproxy` entries.
//
// Extended port ACL weights (larger weights are matched first and the first
// match decides; weights are unique per direction), so each part of the plan
// owns a band and can be replaced without touching the others (the WMI
// setting behind them stores the weight as a 16-bit number, so all stay below 65536):
//   65000   outbound deny of everything, only while a policy is being replaced
//   61000+  inbound allows for published ports            (port_plan)
//   60000   outbound allow of SMB to the host's gateway    (mount_plan)
//   50000+  outbound denies: the NAT range and the host's own addresses
//   45000+  outbound allows: DNS
//   40000+  outbound denies: private and link-local ranges (deny-LAN)
//   30000+  outbound allows: private and link-local ranges (--allow-lan)
//   20000+  outbound allows: the allowlist, 100 weights per rule
//   1       deny everything else, both directions
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agentctl/provider.hpp"
#include "agentctl/sandbox.hpp"

namespace agentctl::provider::hyperv {

inline constexpr std::string_view k_nat_name = "agentctl";
inline constexpr std::string_view k_nat_prefix = "172.30.0.0/16";

// ACL weight bands (see above).
inline constexpr int k_weight_port_publish = 61000;
inline constexpr int k_weight_smb = 60000;
inline constexpr int k_weight_host_deny = 50000;
inline constexpr int k_weight_dns = 45000;
inline constexpr int k_weight_lan_deny = 40000;
inline constexpr int k_weight_lan_allow = 30000;
inline constexpr int k_weight_allowlist = 20000;
inline constexpr int k_weights_per_allow_rule = 100;
inline constexpr int k_max_allow_rules = 100;
inline constexpr int k_weight_default_deny = 1;

// Where a sandbox's pieces live on the Hyper-V host; a pure function of the
// sandbox name and agentctl's config directory.
struct Layout {
    std::string vm_name;
    std::string switch_name;     // agentctl-<name>
    std::string host_interface;  // vEthernet (agentctl-<name>): the host's adapter on the switch
    std::string state_dir;       // <state dir>/hyperv/<name>
    std::string disk_path;       // <state dir>/disk.vhdx
    int subnet_index = 0;        // N in 172.30.N.0/24, 1..254
    std::string subnet;          // 172.30.N.0/24
    std::string gateway;         // 172.30.N.1, the host
    std::string guest_address;   // 172.30.N.2
    std::string firewall_group;  // agentctl-<name>
    std::string share_prefix;    // agentctl-<name>-: SMB share names are this plus an index
    std::string smb_account;     // the local Windows account shares are granted to (<= 20 characters)
};

// N is a hash of the name, so two names can collide: the real provider must
// allocate N under a lock in its state instead (not built yet).
[[nodiscard]] Layout layout_for(std::string_view name, std::string_view config_dir);

// Scripts to run in order, and notes for the person: what the plan leaves to
// them or leaves out.
struct Plan {
    std::vector<std::string> scripts;
    std::vector<std::string> notes;

    void append(Plan other);
};

// The whole of create: directory, differencing disk, switch, host address, NAT,
// VM, firmware, CPU, memory, adapter guards, firewall rules, then
// network_policy_plan, mount_plan and port_plan. Throws agentctl::Error on a
// spec Hyper-V cannot express (no image, container isolation, UDP ports, a
// non-IPv4 listen address, too many allow rules).
[[nodiscard]] Plan create_plan(const SandboxSpec& spec, const Layout& layout);

// Start-VM; with new mounts, the shares are replaced first.
[[nodiscard]] Plan start_plan(const Layout& layout, const StartRequest& request);

// Stop-VM -Force (graceful shutdown through the guest, never a prompt);
// --force: Stop-VM -TurnOff; --timeout N: a graceful stop as a job, turned
// off if it has not finished after N seconds.
[[nodiscard]] Plan stop_plan(const Layout& layout, const StopRequest& request);

// Everything create made, each step tolerant of a missing piece so that a
// half-created sandbox is removed too; the shared NAT goes with the last
// agentctl switch. Without `force` a running VM is refused.
[[nodiscard]] Plan remove_plan(const Layout& layout, bool force);

// The outbound policy as extended port ACLs (weights below k_weight_smb).
[[nodiscard]] Plan network_policy_plan(const Layout& layout, const policy::NetworkPolicy& network);

// apply_network_policy: drop the policy's ACL entries, then network_policy_plan.
[[nodiscard]] Plan replace_network_policy_plan(const Layout& layout, const policy::NetworkPolicy& network);

// One SMB share per mount, granted Read (or Change when writable) to the
// sandbox's account, plus the ACL entry that lets the guest reach SMB on its
// gateway. The in-guest `mount -t cifs` lines are returned as notes.
[[nodiscard]] Plan mount_plan(const Layout& layout, const std::vector<Mount>& mounts);

// One portproxy entry per published TCP port and the inbound ACL entry that
// lets the host's adapter reach the guest port.
[[nodiscard]] Plan port_plan(const Layout& layout, const std::vector<PortForward>& ports);

}  // namespace agentctl::provider::hyperv
