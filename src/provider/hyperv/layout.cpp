// Where a sandbox lives on the Hyper-V host: names, paths and addresses.
#include <algorithm>
#include <cctype>
#include <cstdint>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/hash.hpp"
#include "provider/hyperv/plan.hpp"

namespace agentctl::provider::hyperv {
namespace {

using agentctl::fnv1a32;

// Joins with the separator `base` already uses, so a Windows config directory
// (C:\Users\me\...) gets backslashes and a POSIX one gets slashes.
std::string join_path(std::string_view base, std::string_view leaf) {
    const char separator = base.find('\\') != std::string_view::npos ? '\\' : '/';
    std::string joined(base);
    if (!joined.empty() && joined.back() != separator) joined += separator;
    return joined + std::string(leaf);
}

// Windows local account names are at most 20 characters.
constexpr std::size_t k_max_account_name = 20;

}  // namespace

Layout layout_for(std::string_view name, std::string_view config_dir) {
    // Hyper-V's -Name parameters take wildcards, so a name with `*`, `?` or `[`
    // would address other VMs; the CLI already refuses such names, and so does this.
    const bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
    });
    if (!valid) {
        throw Error(fmt::format("hyperv: invalid sandbox name '{}'", name), "use letters, digits and '-' only");
    }
    Layout layout;
    layout.vm_name = std::string(name);
    layout.switch_name = fmt::format("agentctl-{}", name);
    layout.host_interface = fmt::format("vEthernet ({})", layout.switch_name);
    layout.state_dir = join_path(join_path(config_dir, "hyperv"), name);
    layout.disk_path = join_path(layout.state_dir, "disk.vhdx");
    layout.subnet_index = static_cast<int>(1 + fnv1a32(name) % 254);
    layout.subnet = fmt::format("172.30.{}.0/24", layout.subnet_index);
    layout.gateway = fmt::format("172.30.{}.1", layout.subnet_index);
    layout.guest_address = fmt::format("172.30.{}.2", layout.subnet_index);
    layout.firewall_group = layout.switch_name;
    layout.share_prefix = layout.switch_name + "-";
    layout.smb_account = layout.switch_name.size() <= k_max_account_name
                             ? layout.switch_name
                             : fmt::format("agentctl-{:08x}", fnv1a32(name));
    return layout;
}

}  // namespace agentctl::provider::hyperv
