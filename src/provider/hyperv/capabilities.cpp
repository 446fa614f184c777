// What the hyperv provider can do today, feature by feature, and what to do
// instead. The message is what a person reads when the gate stops them, and
// what a provider method throws when it is called without the gate.
#include <array>
#include <utility>

#include "provider/hyperv/hyperv_provider.hpp"

namespace agentctl::provider::hyperv {
namespace {

using Status = CapabilityStatus;

struct Entry {
    Feature feature;
    Status status;
    std::string_view message;
};

constexpr std::string_view k_exec_missing =
    "running commands in a Linux guest needs a transport from the host (SSH over the sandbox's own switch, or "
    "hv_sock) and PowerShell Direct reaches Windows guests only; not built yet. Connect with Hyper-V's console "
    "or your own SSH, or use the incus (Linux) or lima (macOS) provider";

constexpr std::string_view k_snapshot_missing =
    "Hyper-V checkpoints map onto this (Checkpoint-VM, Get-VMSnapshot, Restore-VMSnapshot, Remove-VMSnapshot) but "
    "agentctl does not drive them yet; run those cmdlets on the VM yourself";

constexpr std::array k_entries{
    Entry{"create", Status::UnderDevelopment,
          "the PowerShell for the VM, its own switch, the NAT, the port ACLs and the host firewall rules is written "
          "(`agentctl --preview create` prints it) but not run, and provisioning inside the guest (the non-root user, "
          "its address on the switch, DNS, packages) needs a cloud-init seed disk that is not built; use the incus "
          "(Linux) or lima (macOS) provider for a working sandbox"},
    Entry{"start", Status::UnderDevelopment,
          "Start-VM is planned (`agentctl --preview start` prints it) but not run, and the check after boot that a "
          "direct connection from the guest fails needs a way into the guest that is not built; start the VM "
          "yourself only if you accept an unverified network policy"},
    Entry{"stop", Status::UnderDevelopment,
          "Stop-VM is planned (graceful, -TurnOff with --force, a timed job with --timeout; `agentctl --preview "
          "stop` prints it) but not run; run Stop-VM -Name NAME yourself"},
    Entry{"delete", Status::UnderDevelopment,
          "removing the VM, its disk, switch, firewall rules, SMB shares and port proxies is planned (`agentctl "
          "--preview delete` prints every step) but not run; run the printed steps yourself"},
    Entry{"list", Status::UnderDevelopment,
          "listing needs agentctl's per-sandbox state on the Windows host, which is not built; Get-VM lists the "
          "VMs and Get-VMSwitch -Name 'agentctl-*' shows which ones agentctl planned"},
    Entry{"status", Status::UnderDevelopment,
          "reading a sandbox's state, address, mounts and policy back from Hyper-V (Get-VM, Get-VMNetworkAdapter, "
          "Get-VMNetworkAdapterExtendedAcl, Get-SmbShare) is not built; run those cmdlets yourself"},
    Entry{"exec", Status::UnderDevelopment, k_exec_missing},
    Entry{"shell", Status::UnderDevelopment, k_exec_missing},
    Entry{"view", Status::UnderDevelopment,
          "the plan is Hyper-V's own console (vmconnect) in a basic session, never an enhanced session, which would "
          "share the clipboard and host drives with the guest; not built yet. Open the VM's console in Hyper-V "
          "Manager yourself and leave enhanced session off for it"},
    Entry{"snapshot.create", Status::UnderDevelopment, k_snapshot_missing},
    Entry{"snapshot.list", Status::UnderDevelopment, k_snapshot_missing},
    Entry{"snapshot.restore", Status::UnderDevelopment, k_snapshot_missing},
    Entry{"snapshot.delete", Status::UnderDevelopment, k_snapshot_missing},
    Entry{"network.acl", Status::UnderDevelopment,
          "default-deny egress as extended port ACLs on the VM's adapter (allowlisted names resolved when the "
          "policy is applied, as on Incus) is written as `--preview` output but not applied or verified on a real "
          "host; until it is, treat a Hyper-V VM as having unrestricted egress"},
    Entry{"network.deny-lan", Status::UnderDevelopment,
          "refusing private and link-local ranges with port ACL deny entries that outrank every allow is written as "
          "`--preview` output but not applied or verified; until it is, a Hyper-V VM behind NAT reaches the LAN"},
    Entry{"network.port-publish", Status::ManualWorkaround,
          "Hyper-V's NAT has no loopback-only port mapping, so publish TCP ports yourself: as "
          "administrator run `netsh interface portproxy add v4tov4 listenaddress=127.0.0.1 listenport=HOST "
          "connectaddress=GUEST-ADDRESS connectport=GUEST` (GUEST-ADDRESS is the 172.30.N.2 address `agentctl "
          "--preview create` shows) and remove it with `netsh interface portproxy delete v4tov4 "
          "listenaddress=127.0.0.1 listenport=HOST` when the sandbox goes; UDP ports cannot be published"},
    Entry{"fs.mount", Status::ManualWorkaround,
          "Hyper-V cannot share a host directory with a Linux guest, so share it over SMB yourself: create a local "
          "account for the sandbox, run `New-SmbShare -Name SHARE -Path DIR -ReadAccess ACCOUNT -EncryptData $true` "
          "(-ChangeAccess instead of -ReadAccess only for a writable mount), then in the guest `mount -t cifs "
          "//GATEWAY/SHARE GUEST-PATH -o ro,vers=3.1.1,seal,username=ACCOUNT`; agentctl's mount checks (credential "
          "deny list, allowed roots, symlinks resolved first) do not cover what you share by hand, so apply them "
          "yourself"},
    Entry{"fs.mount.readonly", Status::ManualWorkaround,
          "read-only takes two settings you make yourself: the share grants Read only (New-SmbShare -ReadAccess, "
          "never -ChangeAccess or -FullAccess), and the guest mounts it with the `ro` option; the share permission "
          "is what holds against root in the guest, `ro` alone does not"},
    Entry{"image.pull", Status::UnderDevelopment,
          "there is no image store to pull into on Hyper-V yet; download a cloud image, convert it yourself "
          "(qemu-img convert -O vhdx) and pass the VHDX's path as --image"},
    Entry{"image.build", Status::UnderDevelopment,
          "building an image needs a guest agentctl can provision, which is not built; prepare the VHDX by hand"},
    Entry{"logs.network", Status::UnderDevelopment,
          "port ACLs record no per-connection decisions, and no egress log exists for Hyper-V yet"},
    Entry{"logs.exec", Status::UnderDevelopment, "exec is not built on Hyper-V, so there is nothing to log yet"},
    Entry{"provision.packages", Status::UnderDevelopment,
          "installing packages needs the in-guest provisioning that create does not have yet; install them in the "
          "base VHDX"},
    Entry{"placement.target", Status::UnderDevelopment,
          "placing a VM on a member of a Hyper-V failover cluster is not built; the VM runs on the host agentctl "
          "drives (--target is for Incus clusters today)"},
    Entry{"network.credentials", Status::UnderDevelopment,
          "credential injection needs the egress proxy, which Hyper-V sandboxes do not have yet"},
    Entry{"gc", Status::UnderDevelopment,
          "finding what an interrupted create left is not built on Hyper-V; `agentctl delete NAME` removes what "
          "agentctl made for NAME"},
    Entry{"pool", Status::UnderDevelopment,
          "a warm pool of Hyper-V VMs is not built (each entry would hold a VM's memory while it waits); create "
          "makes each VM when asked"},
};

}  // namespace

CapabilityMatrix capabilities(const HostPlatform&) {
    auto matrix = base_capabilities();
    for (const auto& entry : k_entries) matrix.set(entry.feature, entry.status, std::string(entry.message));
    return matrix;
}

}  // namespace agentctl::provider::hyperv
