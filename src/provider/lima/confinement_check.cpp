#include "provider/lima/confinement_check.hpp"

#include <filesystem>

#include <fmt/format.h>

namespace agentctl::provider::lima {
namespace {

std::string normal(const std::string& path) {
    if (path.empty()) return path;
    auto p = std::filesystem::path(path).lexically_normal().string();
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
}

// True when `inner` is `outer` or below it, by whole path segments.
bool within(const std::string& inner, const std::string& outer) {
    if (inner == outer) return true;
    if (outer == "/") return !inner.empty() && inner.front() == '/';
    return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 && inner[outer.size()] == '/';
}

void check_mounts(const LimaInstance& inst, const ExpectedConfig& expected, std::vector<Refusal>& out) {
    for (const auto& m : inst.config.mounts) {
        const auto host = normal(m.location);
        const auto guest = normal(m.mount_point);
        const Mount* own = nullptr;
        for (const auto& r : expected.mounts) {
            if (normal(r.guest_path) == guest) own = &r;
        }
        if (!own) {
            out.push_back({RefusalKind::ExtraMount,
                           fmt::format("Lima would also mount {} at {} ({}), which is not one of this sandbox's mounts",
                                       host, guest, m.writable ? "writable" : "read-only")});
        } else if (normal(own->host_path) != host) {
            out.push_back(
                {RefusalKind::MountHostChanged, fmt::format("Lima would mount {} at {}, where this sandbox mounts {}",
                                                            host, guest, normal(own->host_path))});
        } else if (m.writable && !own->writable) {
            out.push_back(
                {RefusalKind::MountMadeWritable,
                 fmt::format("Lima would mount {} at {} writable, but this sandbox mounts it read-only", host, guest)});
        }
        const auto state = normal(expected.state_dir);
        if (m.writable && !state.empty() && (within(state, host) || within(host, state))) {
            out.push_back({RefusalKind::StateDirWritable,
                           fmt::format("Lima would mount {} writable, which covers agentctl's state directory {} "
                                       "(where the egress policy lives)",
                                       host, state)});
        }
    }
}

}  // namespace

std::vector<Refusal> check_effective_config(const LimaInstance& inst, const ExpectedConfig& expected) {
    std::vector<Refusal> out;
    if (!inst.has_config) {
        std::string why;
        for (const auto& error : inst.errors) why += (why.empty() ? "; Lima says: " : "; ") + error;
        out.push_back({RefusalKind::ConfigUnknown,
                       fmt::format("`limactl list --json` gave no effective configuration for it (\"config\": null), "
                                   "so agentctl cannot verify its mounts, forwards and network{}",
                                   why)});
        return out;
    }
    const auto& c = inst.config;
    const std::string vm_type = inst.vm_type.empty() ? c.vm_type : inst.vm_type;
    if (expected.confined && vm_type != "vz") {
        out.push_back({RefusalKind::VmType,
                       fmt::format("the instance uses the VM type \"{}\"; agentctl only confines vz instances, whose "
                                   "networking it has verified runs inside the sandboxed hostagent",
                                   vm_type.empty() ? "(unknown)" : vm_type)});
    }
    check_mounts(inst, expected, out);
    if (c.forward_agent) {
        out.push_back(
            {RefusalKind::ForwardAgent, "Lima would forward your SSH agent into the sandbox (ssh.forwardAgent: true)"});
    }
    if (c.forward_x11) {
        out.push_back(
            {RefusalKind::ForwardX11, "Lima would forward your X11 display into the sandbox (ssh.forwardX11: true)"});
    }
    for (std::size_t i = 0; i < c.port_forwards.size(); ++i) {
        const auto& f = c.port_forwards[i];
        if (!f.reverse) continue;
        std::string what = !f.host_socket.empty() ? f.host_socket : fmt::format("port {}", f.host_port);
        std::string where = !f.guest_socket.empty() ? f.guest_socket : fmt::format("port {}", f.guest_port);
        out.push_back({RefusalKind::ReverseForward,
                       fmt::format("Lima would hand the guest a socket on your host: portForwards[{}] forwards {} to "
                                   "{} in the guest (reverse: true)",
                                   i, what, where)});
    }
    for (const auto& copy : c.copy_to_host) {
        out.push_back({RefusalKind::CopyToHost,
                       fmt::format("Lima would copy {} out of the guest onto your host at {} (copyToHost)", copy.guest,
                                   copy.host)});
    }
    if (expected.confined) {
        for (const auto& n : c.networks) {
            std::string which = n.vz_nat ? "vzNAT" : !n.lima.empty() ? "lima: " + n.lima : "socket: " + n.socket;
            out.push_back({RefusalKind::ExtraNetwork,
                           fmt::format("Lima would attach the additional network \"{}\", whose traffic does not pass "
                                       "through the sandboxed hostagent",
                                       which)});
        }
        const int port = c.ssh_local_port.value_or(inst.ssh_local_port);
        if (port != expected.settings.ssh_port) {
            out.push_back({RefusalKind::SshPortChanged,
                           fmt::format("Lima would forward SSH on port {}, not on the port agentctl pinned for this "
                                       "instance ({})",
                                       port, expected.settings.ssh_port)});
        }
        if (expected.settings.proxy_port != 0) {
            for (const auto& [key, value] : proxy_environment(expected.settings.proxy_port)) {
                auto it = c.env.find(key);
                std::string actual = it == c.env.end() ? "(unset)" : it->second;
                if (actual != value) {
                    out.push_back({RefusalKind::ProxyEnvChanged,
                                   fmt::format("Lima would set {}={} in the guest instead of the sandbox's egress "
                                               "proxy {}",
                                               key, actual, value)});
                }
            }
        }
        if (expected.settings.dns_disabled && c.host_resolver_enabled.value_or(true)) {
            out.push_back({RefusalKind::HostResolverOn,
                           "Lima would answer the guest's DNS queries (hostResolver.enabled), but the sandbox's "
                           "profile sets network.dns.disabled"});
        }
    }
    return out;
}

std::vector<std::string> autostart_registrations(const std::string& home, const std::string& system_root,
                                                 const std::string& name,
                                                 const std::function<bool(const std::string&)>& exists) {
    std::vector<std::string> found;
    auto agent = home + "/Library/LaunchAgents/io.lima-vm.autostart." + name + ".plist";
    std::string root = system_root;
    while (!root.empty() && root.back() == '/') root.pop_back();
    auto daemon = root + "/Library/LaunchDaemons/io.lima-vm.daemon." + name + ".plist";
    if (exists(agent)) found.push_back(agent);
    if (exists(daemon)) found.push_back(daemon);
    return found;
}

std::string render_refusals(const std::string& name, const std::vector<Refusal>& refusals) {
    std::string text = fmt::format("refusing to start Lima instance \"{}\":", name);
    for (const auto& r : refusals) text += "\n  - " + r.message;
    return text;
}

}  // namespace agentctl::provider::lima
