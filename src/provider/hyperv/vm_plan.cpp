// The VM's own lifecycle on Hyper-V: create, start, stop, remove.
#include <cstdint>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/hyperv/plan.hpp"
#include "provider/hyperv/powershell.hpp"

namespace agentctl::provider::hyperv {
namespace {

// Hyper-V only accepts VM memory in whole multiples of 2 MiB; round up.
constexpr std::uint64_t k_memory_granule = 2ull * 1024 * 1024;

std::uint64_t round_up_memory(std::uint64_t bytes) {
    return (bytes + k_memory_granule - 1) / k_memory_granule * k_memory_granule;
}

// New-Item: https://learn.microsoft.com/powershell/module/microsoft.powershell.management/new-item
// New-VHD (Differencing parameter set, optional -SizeBytes for a larger virtual size):
// https://learn.microsoft.com/powershell/module/hyper-v/new-vhd
std::vector<std::string> disk_scripts(const SandboxSpec& spec, const Layout& layout) {
    std::string vhd =
        fmt::format("New-VHD -Path {} -ParentPath {} -Differencing", ps_quote(layout.disk_path), ps_quote(spec.image));
    if (spec.resources.disk_bytes > 0) vhd += fmt::format(" -SizeBytes {}", spec.resources.disk_bytes);
    return {fmt::format("New-Item -ItemType Directory -Force -Path {} | Out-Null", ps_quote(layout.state_dir)),
            std::move(vhd)};
}

// New-VMSwitch: https://learn.microsoft.com/powershell/module/hyper-v/new-vmswitch
// New-NetIPAddress: https://learn.microsoft.com/powershell/module/nettcpip/new-netipaddress
// New-NetNat / Get-NetNat: https://learn.microsoft.com/powershell/module/netnat/new-netnat
// (one NAT network per host, hence one shared NAT over every sandbox's /24:
// https://learn.microsoft.com/virtualization/hyper-v-on-windows/user-guide/setup-nat-network)
std::vector<std::string> switch_scripts(const Layout& layout) {
    return {
        fmt::format("New-VMSwitch -Name {} -SwitchType Internal", ps_quote(layout.switch_name)),
        fmt::format("New-NetIPAddress -InterfaceAlias {} -IPAddress {} -PrefixLength 24",
                    ps_quote(layout.host_interface), layout.gateway),
        fmt::format("if (-not (Get-NetNat -Name {0} -ErrorAction SilentlyContinue)) "
                    "{{ New-NetNat -Name {0} -InternalIPInterfaceAddressPrefix {1} }}",
                    ps_quote(k_nat_name), ps_quote(k_nat_prefix)),
    };
}

// New-VM: https://learn.microsoft.com/powershell/module/hyper-v/new-vm
// Set-VMFirmware (Linux guests boot under the Microsoft UEFI CA template):
// https://learn.microsoft.com/powershell/module/hyper-v/set-vmfirmware
// Set-VMProcessor: https://learn.microsoft.com/powershell/module/hyper-v/set-vmprocessor
// Set-VMMemory: https://learn.microsoft.com/powershell/module/hyper-v/set-vmmemory
// Set-VMNetworkAdapter (MAC spoofing off, DHCP and router guard on):
// https://learn.microsoft.com/powershell/module/hyper-v/set-vmnetworkadapter
std::vector<std::string> vm_scripts(const SandboxSpec& spec, const Layout& layout) {
    const auto vm = ps_quote(layout.vm_name);
    std::vector<std::string> scripts{
        fmt::format("New-VM -Name {} -Generation 2 -Path {} -VHDPath {} -SwitchName {}", vm, ps_quote(layout.state_dir),
                    ps_quote(layout.disk_path), ps_quote(layout.switch_name)),
        fmt::format(
            "Set-VMFirmware -VMName {} -EnableSecureBoot On -SecureBootTemplate MicrosoftUEFICertificateAuthority", vm),
    };
    if (spec.resources.cpu_cores > 0) {
        scripts.push_back(fmt::format("Set-VMProcessor -VMName {} -Count {}", vm, spec.resources.cpu_cores));
    }
    if (spec.resources.memory_bytes > 0) {
        scripts.push_back(fmt::format("Set-VMMemory -VMName {} -DynamicMemoryEnabled $false -StartupBytes {}", vm,
                                      round_up_memory(spec.resources.memory_bytes)));
    }
    scripts.push_back(
        fmt::format("Set-VMNetworkAdapter -VMName {} -MacAddressSpoofing Off -DhcpGuard On -RouterGuard On", vm));
    return scripts;
}

// Host-side Windows Firewall rules on the sandbox's switch adapter: the guest
// reaches no service on the host except SMB (TCP 445), which the port ACL
// opens only when there are mounts. Block rules win over allow rules.
// New-NetFirewallRule: https://learn.microsoft.com/powershell/module/netsecurity/new-netfirewallrule
std::vector<std::string> firewall_scripts(const Layout& layout) {
    const auto group = ps_quote(layout.firewall_group);
    const auto alias = ps_quote(layout.host_interface);
    return {
        fmt::format("New-NetFirewallRule -DisplayName {} -Group {} -Direction Inbound -InterfaceAlias {} "
                    "-Protocol TCP -LocalPort '1-444','446-65535' -Action Block",
                    ps_quote(fmt::format("agentctl {}: sandbox to host, TCP", layout.vm_name)), group, alias),
        fmt::format("New-NetFirewallRule -DisplayName {} -Group {} -Direction Inbound -InterfaceAlias {} "
                    "-Protocol UDP -Action Block",
                    ps_quote(fmt::format("agentctl {}: sandbox to host, UDP", layout.vm_name)), group, alias),
    };
}

// Hyper-V lets two VMs share a name, so "refuse an existing instance" is an
// explicit check; the same check catches two sandbox names hashing to one
// subnet. Get-VM: https://learn.microsoft.com/powershell/module/hyper-v/get-vm
// Get-NetIPAddress: https://learn.microsoft.com/powershell/module/nettcpip/get-netipaddress
std::string guard_script(const Layout& layout) {
    return fmt::format(
        "if (Get-VM -Name {0} -ErrorAction SilentlyContinue) {{ throw {1} }}; "
        "if (Get-VMSwitch -Name {2} -ErrorAction SilentlyContinue) {{ throw {3} }}; "
        "if (Get-NetIPAddress -IPAddress {4} -ErrorAction SilentlyContinue) {{ throw {5} }}",
        ps_quote(layout.vm_name), ps_quote(fmt::format("a VM named {} already exists", layout.vm_name)),
        ps_quote(layout.switch_name), ps_quote(fmt::format("a switch named {} already exists", layout.switch_name)),
        layout.gateway,
        ps_quote(fmt::format("{} is already in use on this host: another sandbox has subnet {}", layout.gateway,
                             layout.subnet)));
}

// The sandbox's shares are exactly <prefix><digits>; matching by pattern
// would also catch sandbox `a-b`'s shares when removing sandbox `a`.
// Get-SmbShare / Remove-SmbShare: https://learn.microsoft.com/powershell/module/smbshare/remove-smbshare
std::string remove_shares_script(const Layout& layout) {
    return fmt::format(
        "Get-SmbShare | Where-Object {{ $_.Name -match ('^' + [regex]::Escape({}) + '\\d+$') }} | "
        "Remove-SmbShare -Force",
        ps_quote(layout.share_prefix));
}

}  // namespace

void Plan::append(Plan other) {
    for (auto& script : other.scripts) scripts.push_back(std::move(script));
    for (auto& note : other.notes) notes.push_back(std::move(note));
}

Plan create_plan(const SandboxSpec& spec, const Layout& layout) {
    if (spec.image.empty()) {
        throw Error("hyperv: create needs an image: the path of a base VHDX on the Windows host",
                    "pass --image C:\\path\\to\\base.vhdx (a Generation 2 Linux image)");
    }
    if (spec.isolation == Isolation::Container) {
        throw Error("hyperv: --isolation container is not offered on the hyperv provider; every sandbox is a VM",
                    "drop --isolation container", exit_code::k_not_available);
    }
    Plan plan;
    plan.scripts.push_back(guard_script(layout));
    for (auto&& s : disk_scripts(spec, layout)) plan.scripts.push_back(std::move(s));
    for (auto&& s : switch_scripts(layout)) plan.scripts.push_back(std::move(s));
    for (auto&& s : vm_scripts(spec, layout)) plan.scripts.push_back(std::move(s));
    for (auto&& s : firewall_scripts(layout)) plan.scripts.push_back(std::move(s));
    plan.append(network_policy_plan(layout, spec.network));
    plan.append(mount_plan(layout, spec.mounts));
    plan.append(port_plan(layout, spec.ports));
    plan.notes.push_back(fmt::format(
        "not in this plan: provisioning inside the guest (user {}, address {}/24 via {}, DNS, packages{}) — "
        "it needs a cloud-init seed disk that is not built yet",
        spec.user, layout.guest_address, layout.gateway, spec.agent.empty() ? "" : ", agent " + spec.agent));
    return plan;
}

// Start-VM: https://learn.microsoft.com/powershell/module/hyper-v/start-vm
// Remove-VMNetworkAdapterExtendedAcl:
// https://learn.microsoft.com/powershell/module/hyper-v/remove-vmnetworkadapterextendedacl
Plan start_plan(const Layout& layout, const StartRequest& request) {
    Plan plan;
    if (request.mounts) {
        plan.scripts.push_back(remove_shares_script(layout));
        plan.scripts.push_back(
            fmt::format("Remove-VMNetworkAdapterExtendedAcl -VMName {} -Weight {} -Direction Outbound -ErrorAction "
                        "SilentlyContinue",
                        ps_quote(layout.vm_name), k_weight_smb));
        plan.append(mount_plan(layout, *request.mounts));
    }
    plan.scripts.push_back(fmt::format("Start-VM -Name {}", ps_quote(layout.vm_name)));
    plan.notes.push_back(
        "not in this plan: the confinement check after boot (a direct connection from the guest must fail) — "
        "it needs a way to run commands in the guest that is not built yet");
    return plan;
}

// Stop-VM (-Force: shut down through the guest without prompting; -TurnOff:
// power off; -AsJob): https://learn.microsoft.com/powershell/module/hyper-v/stop-vm
// Wait-Job: https://learn.microsoft.com/powershell/module/microsoft.powershell.core/wait-job
Plan stop_plan(const Layout& layout, const StopRequest& request) {
    const auto vm = ps_quote(layout.vm_name);
    Plan plan;
    if (request.force) {
        plan.scripts.push_back(fmt::format("Stop-VM -Name {} -TurnOff", vm));
    } else if (request.timeout_seconds) {
        plan.scripts.push_back(
            fmt::format("$job = Stop-VM -Name {0} -Force -AsJob; "
                        "if (-not (Wait-Job -Job $job -Timeout {1})) {{ Stop-VM -Name {0} -TurnOff }}",
                        vm, *request.timeout_seconds));
    } else {
        plan.scripts.push_back(fmt::format("Stop-VM -Name {} -Force", vm));
    }
    return plan;
}

// Remove-VM (leaves the disks behind, hence Remove-Item):
// https://learn.microsoft.com/powershell/module/hyper-v/remove-vm
// Remove-NetFirewallRule: https://learn.microsoft.com/powershell/module/netsecurity/remove-netfirewallrule
// netsh interface portproxy:
// https://learn.microsoft.com/windows-server/networking/technologies/netsh/netsh-interface-portproxy Remove-VMSwitch:
// https://learn.microsoft.com/powershell/module/hyper-v/remove-vmswitch Remove-NetNat:
// https://learn.microsoft.com/powershell/module/netnat/remove-netnat
Plan remove_plan(const Layout& layout, bool force) {
    const auto vm = ps_quote(layout.vm_name);
    Plan plan;
    if (force) {
        plan.scripts.push_back(fmt::format(
            "Get-VM -Name {} -ErrorAction SilentlyContinue | Where-Object {{ $_.State -ne 'Off' }} | Stop-VM -TurnOff",
            vm));
    } else {
        plan.scripts.push_back(fmt::format(
            "if ((Get-VM -Name {0} -ErrorAction SilentlyContinue).State -eq 'Running') "
            "{{ throw {1} }}",
            vm, ps_quote(fmt::format("sandbox {} is running: stop it first or pass --force", layout.vm_name))));
    }
    plan.scripts.push_back(fmt::format("Get-VM -Name {} -ErrorAction SilentlyContinue | Remove-VM -Force", vm));
    plan.scripts.push_back(fmt::format("Remove-Item -LiteralPath {} -Recurse -Force -ErrorAction SilentlyContinue",
                                       ps_quote(layout.state_dir)));
    plan.scripts.push_back(remove_shares_script(layout));
    // `show v4tov4` prints "listen-address listen-port connect-address connect-port" rows.
    plan.scripts.push_back(fmt::format(
        "netsh interface portproxy show v4tov4 | ForEach-Object {{ "
        "if ($_ -match '^\\s*(\\S+)\\s+(\\d+)\\s+{0}\\s+\\d+\\s*$') "
        "{{ netsh interface portproxy delete v4tov4 listenaddress=$($Matches[1]) listenport=$($Matches[2]) }} }}",
        "172\\.30\\." + std::to_string(layout.subnet_index) + "\\.2"));
    plan.scripts.push_back(
        fmt::format("Remove-NetFirewallRule -Group {} -ErrorAction SilentlyContinue", ps_quote(layout.firewall_group)));
    plan.scripts.push_back(fmt::format("Get-VMSwitch -Name {} -ErrorAction SilentlyContinue | Remove-VMSwitch -Force",
                                       ps_quote(layout.switch_name)));
    plan.scripts.push_back(
        fmt::format("if (-not (Get-VMSwitch -Name 'agentctl-*' -ErrorAction SilentlyContinue)) "
                    "{{ Get-NetNat -Name {} -ErrorAction SilentlyContinue | Remove-NetNat -Confirm:$false }}",
                    ps_quote(k_nat_name)));
    return plan;
}

}  // namespace agentctl::provider::hyperv
