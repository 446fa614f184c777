#include "provider/incus/payloads.hpp"

#include <fmt/format.h>

#include "provider/incus/naming.hpp"

namespace agentctl::provider::incus {

std::string bytes_value(std::uint64_t bytes) { return fmt::format("{}B", bytes); }

Json network_payload(const std::string& sandbox, const std::string& bridge, const Ipv4Net& subnet,
                     const std::string& acl) {
    Json config{
        {"ipv4.address", subnet.host(1).to_string()},
        {"ipv4.nat", "true"},
        {"ipv4.dhcp", "true"},
        {"ipv6.address", "none"},
        {std::string(key::k_sandbox), sandbox},
    };
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

Json mount_devices(const std::vector<Mount>& mounts, Isolation isolation) {
    Json devices = Json::object();
    for (std::size_t i = 0; i < mounts.size(); ++i) {
        const auto& mount = mounts[i];
        Json device{{"type", "disk"}, {"source", mount.host_path}, {"path", mount.guest_path}};
        if (!mount.writable) device["readonly"] = "true";
        // Containers: an idmapped mount, so host owners appear unchanged inside.
        // VMs share the directory over virtiofs, where `shift` does not apply.
        if (isolation == Isolation::Container) device["shift"] = "true";
        devices[mount_device_name(i)] = std::move(device);
    }
    return devices;
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

std::string mounts_record(const std::vector<Mount>& mounts) {
    Json list = Json::array();
    for (const auto& m : mounts) {
        list.push_back(
            {{"host_path", m.host_path}, {"guest_path", m.guest_path}, {"writable", m.writable}, {"origin", m.origin}});
    }
    return list.dump();
}

std::vector<Mount> parse_mounts_record(const std::string& text) {
    std::vector<Mount> mounts;
    auto list = Json::parse(text, nullptr, false);
    if (!list.is_array()) return mounts;
    for (const auto& item : list) {
        if (!item.is_object()) continue;
        mounts.push_back(Mount{item.value("host_path", ""), item.value("guest_path", ""), item.value("writable", false),
                               item.value("origin", "")});
    }
    return mounts;
}

std::map<std::string, std::string> instance_config(const SandboxSpec& spec, const std::string& bridge,
                                                   const Ipv4Net& subnet, bool acl_attached) {
    std::map<std::string, std::string> config;
    if (spec.resources.cpu_cores > 0) config["limits.cpu"] = std::to_string(spec.resources.cpu_cores);
    if (spec.resources.memory_bytes > 0) config["limits.memory"] = bytes_value(spec.resources.memory_bytes);
    if (spec.isolation == Isolation::Vm) {
        // The Debian/Ubuntu images agentctl uses are not signed for the OVMF
        // secure boot keys Incus enrols (doc: instance options, security.secureboot).
        config["security.secureboot"] = "false";
    }
    Json ports = Json::array();
    for (const auto& p : spec.ports) {
        ports.push_back({{"listen_address", p.listen_address},
                         {"host_port", p.host_port},
                         {"guest_port", p.guest_port},
                         {"protocol", p.protocol}});
    }
    config[std::string(key::k_managed)] = "true";
    config[std::string(key::k_user)] = spec.user;
    config[std::string(key::k_isolation)] = spec.isolation == Isolation::Vm ? "vm" : "container";
    config[std::string(key::k_image)] = spec.image;
    config[std::string(key::k_profiles)] = Json(spec.profiles).dump();
    config[std::string(key::k_network)] = policy::to_policy_file(spec.network).dump();
    config[std::string(key::k_mounts)] = mounts_record(spec.mounts);
    config[std::string(key::k_ports)] = ports.dump();
    config[std::string(key::k_packages)] = Json(spec.packages).dump();
    config[std::string(key::k_widenings)] = Json(widenings(spec)).dump();
    config[std::string(key::k_agent)] = spec.agent;
    config[std::string(key::k_agent_installed)] = spec.agent.empty() ? "" : "false";
    config[std::string(key::k_bridge)] = bridge;
    config[std::string(key::k_acl)] = acl_attached ? acl_name(spec.name) : "";
    config[std::string(key::k_subnet)] = subnet.host(1).to_string();
    return config;
}

bool is_image_fingerprint(std::string_view image) {
    return image.size() >= 12 && image.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

Json instance_payload(const SandboxSpec& spec, const std::map<std::string, std::string>& config, const Json& devices,
                      bool start) {
    Json source{{"type", "image"}};
    source[is_image_fingerprint(spec.image) ? "fingerprint" : "alias"] = spec.image;
    return Json{{"name", spec.name},
                {"type", spec.isolation == Isolation::Vm ? "virtual-machine" : "container"},
                {"source", std::move(source)},
                {"profiles", Json::array({"default"})},
                {"config", config},
                {"devices", devices},
                {"start", start},
                {"description", "agentctl sandbox"}};
}

Json exec_payload(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                  const GuestUser* user) {
    Json environment = Json::object();
    environment["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    environment["LANG"] = "C.UTF-8";
    if (user != nullptr) {
        environment["HOME"] = user->home;
        environment["USER"] = user->name;
        environment["LOGNAME"] = user->name;
    } else {
        environment["HOME"] = "/root";
        environment["USER"] = "root";
    }
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

Json image_publish_payload(const std::string& instance, const std::string& alias) {
    return Json{{"source", {{"type", "instance"}, {"name", instance}}},
                {"aliases", Json::array({{{"name", alias}, {"description", "built by agentctl image build"}}})},
                {"properties", {{"description", fmt::format("agentctl image {}", alias)}}}};
}

}  // namespace agentctl::provider::incus
