#include "provider/incus/client/payloads.hpp"

#include <fmt/format.h>

#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/sandbox_record.hpp"

namespace agentctl::provider::incus {

std::string bytes_value(std::uint64_t bytes) { return fmt::format("{}B", bytes); }

Json network_payload(const std::string& sandbox, const std::string& bridge, const Ipv4Net& subnet,
                     const std::string& acl, BridgeResolver resolver) {
    Json config{
        {"ipv4.address", subnet.host(1).to_string()},
        {"ipv4.nat", "true"},
        {"ipv4.dhcp", resolver == BridgeResolver::Incus ? "true" : "false"},
        {"ipv6.address", "none"},
        {std::string(key::k_sandbox), sandbox},
    };
    if (resolver == BridgeResolver::Host) config["dns.mode"] = "none";
    if (!acl.empty()) {
        config["security.acls"] = acl;
        config["security.acls.default.egress.action"] = "reject";
        config["security.acls.default.ingress.action"] = "reject";
    }
    return Json{{"name", bridge},
                {"type", "bridge"},
                {"description", fmt::format("agentctl sandbox {}", sandbox)},
                {"config", std::move(config)}};
}

std::string_view resolver_record(BridgeResolver resolver) {
    return resolver == BridgeResolver::Host ? "host" : "incus";
}

Json mount_devices(const std::vector<Mount>& mounts, Isolation isolation) {
    Json devices = Json::object();
    for (std::size_t i = 0; i < mounts.size(); ++i) {
        const auto& mount = mounts[i];
        Json device{{"type", "disk"}, {"source", mount.host_path}, {"path", mount.guest_path}};
        if (!mount.writable) device["readonly"] = "true";
        // No `shift`: ownership follows the instance's idmap (see payloads.hpp).
        // VMs: virtiofs only, the bus on which raw.idmap is enforced.
        if (isolation == Isolation::Vm) device["io.bus"] = "virtiofs";
        devices[mount_device_name(i)] = std::move(device);
    }
    return devices;
}

int guest_uid_for(const std::vector<MountOwner>& writable_owners) {
    if (!writable_owners.empty()) {
        const int uid = writable_owners.front().uid;
        if (uid >= 1000 && uid < 60000) return uid;
    }
    return k_default_guest_uid;
}

std::optional<IdentityMap> plan_identity_map(const std::vector<MountOwner>& writable_owners, int guest_uid) {
    if (writable_owners.empty()) return std::nullopt;
    std::vector<std::string> problems;
    const auto& first = writable_owners.front();
    for (const auto& owner : writable_owners) {
        if (owner.uid == 0 || owner.gid == 0) {
            problems.push_back(
                fmt::format("{} belongs to root (uid {} gid {}); host root is never mapped into a "
                            "sandbox",
                            owner.host_path, owner.uid, owner.gid));
        } else if (owner.uid != first.uid || owner.gid != first.gid) {
            problems.push_back(
                fmt::format("{} belongs to {}:{} but {} to {}:{}; the writable mounts of one sandbox "
                            "must have one owner (only one host user is mapped into it)",
                            owner.host_path, owner.uid, owner.gid, first.host_path, first.uid, first.gid));
        }
    }
    if (!problems.empty()) {
        std::string message = "the writable mounts cannot be given to the sandbox user:";
        for (const auto& problem : problems) message += "\n  " + problem;
        throw Error(message,
                    "chown the directories to the user who runs the agent (chown -R USER: DIR), or mount "
                    "them read-only");
    }
    return IdentityMap{first.uid, first.gid, guest_uid, guest_uid};
}

std::string raw_idmap_value(const IdentityMap& map) {
    return fmt::format("uid {} {}\ngid {} {}", map.host_uid, map.guest_uid, map.host_gid, map.guest_gid);
}

bool subordinate_ids_allow(const std::string& text, int id) {
    std::size_t at = 0;
    while (at < text.size()) {
        auto end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        const std::string_view line(text.data() + at, end - at);
        at = end + 1;
        const auto first = line.find(':');
        const auto second = first == std::string_view::npos ? first : line.find(':', first + 1);
        if (second == std::string_view::npos) continue;
        const auto owner = line.substr(0, first);
        if (owner != "root" && owner != "0") continue;
        long long start = -1, count = -1;
        try {
            start = std::stoll(std::string(line.substr(first + 1, second - first - 1)));
            count = std::stoll(std::string(line.substr(second + 1)));
        } catch (const std::exception&) {
            continue;
        }
        if (start >= 0 && count > 0 && id >= start && id < start + count) return true;
    }
    return false;
}

std::string guest_path(const std::string& home) {
    return fmt::format(
        "{0}/.local/bin:{0}/.npm-global/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", home);
}

Json port_devices(const std::vector<PortForward>& ports) {
    Json devices = Json::object();
    for (const auto& port : ports) {
        const auto& address = port.listen_address;
        const bool v6 = address.find(':') != std::string::npos;
        devices[port_device_name(port.protocol, port.host_port)] = Json{
            {"type", "proxy"},
            {"listen", fmt::format("{}:{}:{}", port.protocol, v6 ? "[" + address + "]" : address, port.host_port)},
            {"connect", fmt::format("{}:127.0.0.1:{}", port.protocol, port.guest_port)},
        };
    }
    return devices;
}

Json instance_devices(const SandboxSpec& spec, const std::string& bridge, const std::string& pool) {
    Json devices = mount_devices(spec.mounts, spec.isolation);
    devices.update(port_devices(spec.ports));
    Json root{{"type", "disk"}, {"path", "/"}, {"pool", pool}};
    if (spec.resources.disk_bytes != 0) root["size"] = bytes_value(spec.resources.disk_bytes);
    devices["root"] = std::move(root);
    devices["eth0"] = Json{{"type", "nic"}, {"name", "eth0"}, {"network", bridge}};
    return devices;
}

std::map<std::string, std::string> instance_config(const SandboxSpec& spec, const std::string& bridge,
                                                   const Ipv4Net& subnet, bool acl_attached,
                                                   const std::optional<IdentityMap>& idmap) {
    std::map<std::string, std::string> config;
    if (spec.resources.cpu_cores > 0) config["limits.cpu"] = std::to_string(spec.resources.cpu_cores);
    if (spec.resources.memory_bytes > 0) config["limits.memory"] = bytes_value(spec.resources.memory_bytes);
    config["security.guestapi"] = "false";
    // Never started by incusd on its own (at boot it restores the last state
    // when this is unset): only `agentctl start`, which re-checks the mounts and
    // brings the proxy, resolver and firewall table up first, starts a sandbox.
    config["boot.autostart"] = "false";
    if (idmap) config["raw.idmap"] = raw_idmap_value(*idmap);
    if (spec.isolation == Isolation::Container) {
        // Container-only keys (doc: instance options); VMs have their own kernel.
        config["security.idmap.isolated"] = "true";
        config["limits.processes"] =
            std::to_string(spec.resources.processes > 0 ? spec.resources.processes : k_default_processes);
    }
    if (spec.isolation == Isolation::Vm) {
        // The Debian/Ubuntu images agentctl uses are not signed for the OVMF
        // secure boot keys Incus enrols (doc: instance options, security.secureboot).
        config["security.secureboot"] = "false";
    }
    config.merge(sandbox_record_config(spec, bridge, subnet, acl_attached));
    return config;
}

bool is_image_fingerprint(std::string_view image) {
    return image.size() >= 12 && image.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string_view instance_type_name(Isolation isolation) {
    return isolation == Isolation::Vm ? "virtual-machine" : "container";
}

Json instance_payload(const SandboxSpec& spec, const std::map<std::string, std::string>& config, const Json& devices,
                      bool start) {
    Json source{{"type", "image"}};
    source[is_image_fingerprint(spec.image) ? "fingerprint" : "alias"] = spec.image;
    return Json{{"name", spec.name},
                {"type", instance_type_name(spec.isolation)},
                {"source", std::move(source)},
                {"profiles", Json::array({"default"})},
                {"config", config},
                {"devices", devices},
                {"start", start},
                {"description", "agentctl sandbox"}};
}

std::map<std::string, std::string> exec_environment(const GuestUser* user) {
    if (user == nullptr) {
        return {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                {"LANG", "C.UTF-8"},
                {"HOME", "/root"},
                {"USER", "root"}};
    }
    return {{"PATH", guest_path(user->home)},
            {"LANG", "C.UTF-8"},
            {"HOME", user->home},
            {"USER", user->name},
            {"LOGNAME", user->name},
            {"NPM_CONFIG_PREFIX", user->home + "/.npm-global"}};
}

Json exec_payload(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                  const GuestUser* user) {
    Json environment = Json::object();
    for (const auto& [k, v] : exec_environment(user)) environment[k] = v;
    for (const auto& [k, v] : env) environment[k] = v;
    Json payload{{"command", argv},
                 {"environment", std::move(environment)},
                 {"interactive", false},
                 {"wait-for-websocket", false},
                 {"record-output", true}};
    if (user != nullptr) {
        payload["user"] = user->uid;
        payload["group"] = user->gid;
        payload["cwd"] = user->home;
    } else {
        payload["cwd"] = "/root";
    }
    return payload;
}

Json streamed_exec_payload(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                           const GuestUser* user) {
    auto payload = exec_payload(argv, env, user);
    payload["wait-for-websocket"] = true;
    payload["record-output"] = false;
    return payload;
}

Json state_payload(const std::string& action, bool force, int timeout_seconds) {
    Json payload{{"action", action}, {"force", force}};
    if (timeout_seconds >= 0) payload["timeout"] = timeout_seconds;
    return payload;
}

Json image_pull_payload(const std::string& remote_url, const std::string& ref) {
    return Json{
        {"source",
         {{"type", "image"}, {"mode", "pull"}, {"server", remote_url}, {"protocol", "simplestreams"}, {"alias", ref}}},
        {"aliases", Json::array({{{"name", ref}, {"description", "pulled by agentctl"}}})},
        {"auto_update", false}};
}

Json image_publish_payload(const std::string& instance, const std::string& alias, const Json& properties) {
    Json all = properties;
    all["description"] = fmt::format("agentctl image {}", alias);
    return Json{{"source", {{"type", "instance"}, {"name", instance}}},
                {"aliases", Json::array({{{"name", alias}, {"description", "built by agentctl image build"}}})},
                {"properties", all}};
}

}  // namespace agentctl::provider::incus
