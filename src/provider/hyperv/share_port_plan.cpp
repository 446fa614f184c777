// Host directories as SMB shares and published ports as port proxies: the two
// ManualWorkaround features, planned here so --preview shows the exact steps.
#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "provider/hyperv/plan.hpp"
#include "provider/hyperv/powershell.hpp"

namespace agentctl::provider::hyperv {
namespace {

// A dotted-quad IPv4 address without leading zeros (netsh's v4tov4 takes
// IPv4 only, and a leading zero reads as octal in some parsers).
bool is_plain_ipv4(std::string_view text) {
    int parts = 0;
    std::size_t i = 0;
    while (i <= text.size()) {
        const auto end = text.find('.', i);
        const auto part = text.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
        if (part.empty() || part.size() > 3 || (part.size() > 1 && part.front() == '0')) return false;
        int value = 0;
        for (char c : part) {
            if (c < '0' || c > '9') return false;
            value = value * 10 + (c - '0');
        }
        if (value > 255) return false;
        ++parts;
        if (end == std::string_view::npos) break;
        i = end + 1;
    }
    return parts == 4;
}

std::string allow_acl(const Layout& layout, std::string_view direction, const std::string& match, int weight) {
    // Add-VMNetworkAdapterExtendedAcl:
    // https://learn.microsoft.com/powershell/module/hyper-v/add-vmnetworkadapterextendedacl
    return fmt::format(
        "Add-VMNetworkAdapterExtendedAcl -VMName {} -Action Allow -Direction {} {} -Weight {} -Stateful $true",
        ps_quote(layout.vm_name), direction, match, weight);
}

}  // namespace

// New-SmbShare (-ReadAccess / -ChangeAccess grant share permissions to the
// named account only; -EncryptData requires SMB 3 encryption):
// https://learn.microsoft.com/powershell/module/smbshare/new-smbshare
Plan mount_plan(const Layout& layout, const std::vector<Mount>& mounts) {
    Plan plan;
    if (mounts.empty()) return plan;
    for (std::size_t i = 0; i < mounts.size(); ++i) {
        const auto& mount = mounts[i];
        const auto share = fmt::format("{}{}", layout.share_prefix, i);
        plan.scripts.push_back(fmt::format("New-SmbShare -Name {} -Path {} {} {} -EncryptData $true", ps_quote(share),
                                           ps_quote(mount.host_path), mount.writable ? "-ChangeAccess" : "-ReadAccess",
                                           ps_quote(layout.smb_account)));
        plan.notes.push_back(fmt::format(
            "in the guest, as root: {}",
            shell_join(
                {"mount", "-t", "cifs", fmt::format("//{}/{}", layout.gateway, share), mount.guest_path, "-o",
                 fmt::format("{},vers=3.1.1,seal,username={}", mount.writable ? "rw" : "ro", layout.smb_account)})));
    }
    plan.scripts.push_back(allow_acl(layout, "Outbound",
                                     fmt::format("-RemoteIPAddress {} -RemotePort 445 -Protocol TCP", layout.gateway),
                                     k_weight_smb));
    plan.notes.push_back(fmt::format(
        "the shares are granted to the local Windows account '{}', which agentctl does not create: create it "
        "(New-LocalUser) and give its password to the guest's mount yourself",
        layout.smb_account));
    return plan;
}

// netsh interface portproxy add v4tov4 (TCP only):
// https://learn.microsoft.com/windows-server/networking/technologies/netsh/netsh-interface-portproxy
Plan port_plan(const Layout& layout, const std::vector<PortForward>& ports) {
    Plan plan;
    for (std::size_t i = 0; i < ports.size(); ++i) {
        const auto& port = ports[i];
        const auto flag = fmt::format("--port {}:{}/{}", port.host_port, port.guest_port, port.protocol);
        if (port.protocol != "tcp") {
            throw Error(fmt::format("hyperv: {}: only TCP ports can be published on the hyperv provider "
                                    "(netsh interface portproxy forwards TCP only)",
                                    flag),
                        "drop the UDP port", exit_code::k_not_available);
        }
        if (!is_plain_ipv4(port.listen_address)) {
            throw Error(
                fmt::format("hyperv: {}: listen address '{}' is not an IPv4 address", flag, port.listen_address),
                "publish on 127.0.0.1 (the default)");
        }
        plan.scripts.push_back(fmt::format(
            "netsh interface portproxy add v4tov4 listenaddress={} listenport={} connectaddress={} connectport={}",
            port.listen_address, port.host_port, layout.guest_address, port.guest_port));
        plan.scripts.push_back(
            allow_acl(layout, "Inbound",
                      fmt::format("-RemoteIPAddress {} -LocalPort {} -Protocol TCP", layout.gateway, port.guest_port),
                      k_weight_port_publish + static_cast<int>(i)));
        if (port.listen_address.rfind("127.", 0) != 0) {
            plan.notes.push_back(fmt::format("port {} listens on {}: reachable from other machines, not only this one",
                                             port.host_port, port.listen_address));
        }
    }
    return plan;
}

}  // namespace agentctl::provider::hyperv
