#include "provider/lima/lima_instance.hpp"

#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"

namespace agentctl::provider::lima {
namespace {

using nlohmann::json;

[[noreturn]] void bad_field(const std::string& path, const char* expected) {
    throw Error("cannot read `limactl list --json`: field " + path + " is not " + expected,
                "check that limactl is Lima v1.0 or later (`limactl --version`)");
}

const json* member(const json& object, const char* key) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
}

std::string get_string(const json& object, const char* key, const std::string& path) {
    const json* v = member(object, key);
    if (!v) return {};
    if (!v->is_string()) bad_field(path + "." + key, "a string");
    return v->get<std::string>();
}

std::optional<std::string> get_optional_string(const json& object, const char* key, const std::string& path) {
    const json* v = member(object, key);
    if (!v) return std::nullopt;
    if (!v->is_string()) bad_field(path + "." + key, "a string");
    return v->get<std::string>();
}

std::int64_t get_int(const json& object, const char* key, const std::string& path) {
    const json* v = member(object, key);
    if (!v) return 0;
    if (!v->is_number_integer()) bad_field(path + "." + key, "an integer");
    return v->get<std::int64_t>();
}

std::optional<bool> get_optional_bool(const json& object, const char* key, const std::string& path) {
    const json* v = member(object, key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) bad_field(path + "." + key, "a boolean");
    return v->get<bool>();
}

const json* get_array(const json& object, const char* key, const std::string& path) {
    const json* v = member(object, key);
    if (!v) return nullptr;
    if (!v->is_array()) bad_field(path + "." + key, "an array");
    return v;
}

const json* get_object(const json& object, const char* key, const std::string& path) {
    const json* v = member(object, key);
    if (!v) return nullptr;
    if (!v->is_object()) bad_field(path + "." + key, "an object");
    return v;
}

std::string expand_home(const std::string& location, const std::string& home) {
    if (location == "~") return home;
    if (location.rfind("~/", 0) == 0) return home + location.substr(1);
    return location;
}

std::string element_path(const std::string& base, std::size_t i) { return base + "[" + std::to_string(i) + "]"; }

LimaConfig parse_config(const json& c, const std::string& home) {
    const std::string path = "config";
    LimaConfig config;
    config.vm_type = get_string(c, "vmType", path);
    if (const json* user = get_object(c, "user", path))
        config.user_name = get_optional_string(*user, "name", path + ".user");
    if (const json* mounts = get_array(c, "mounts", path)) {
        for (std::size_t i = 0; i < mounts->size(); ++i) {
            const json& m = (*mounts)[i];
            auto p = element_path(path + ".mounts", i);
            if (!m.is_object()) bad_field(p, "an object");
            LimaMount mount;
            mount.location = expand_home(get_string(m, "location", p), home);
            auto point = get_optional_string(m, "mountPoint", p);
            mount.mount_point = point && !point->empty() ? expand_home(*point, home) : mount.location;
            mount.writable = get_optional_bool(m, "writable", p).value_or(false);
            config.mounts.push_back(std::move(mount));
        }
    }
    if (const json* ssh = get_object(c, "ssh", path)) {
        config.forward_agent = get_optional_bool(*ssh, "forwardAgent", path + ".ssh").value_or(false);
        config.forward_x11 = get_optional_bool(*ssh, "forwardX11", path + ".ssh").value_or(false);
        if (member(*ssh, "localPort"))
            config.ssh_local_port = static_cast<int>(get_int(*ssh, "localPort", path + ".ssh"));
    }
    if (const json* forwards = get_array(c, "portForwards", path)) {
        for (std::size_t i = 0; i < forwards->size(); ++i) {
            const json& f = (*forwards)[i];
            auto p = element_path(path + ".portForwards", i);
            if (!f.is_object()) bad_field(p, "an object");
            LimaPortForward forward;
            forward.guest_port = static_cast<int>(get_int(f, "guestPort", p));
            forward.host_port = static_cast<int>(get_int(f, "hostPort", p));
            forward.host_ip = get_string(f, "hostIP", p);
            forward.guest_socket = get_string(f, "guestSocket", p);
            forward.host_socket = get_string(f, "hostSocket", p);
            forward.proto = get_string(f, "proto", p);
            forward.reverse = get_optional_bool(f, "reverse", p).value_or(false);
            config.port_forwards.push_back(std::move(forward));
        }
    }
    if (const json* copies = get_array(c, "copyToHost", path)) {
        for (std::size_t i = 0; i < copies->size(); ++i) {
            const json& e = (*copies)[i];
            auto p = element_path(path + ".copyToHost", i);
            if (!e.is_object()) bad_field(p, "an object");
            config.copy_to_host.push_back({get_string(e, "guest", p), get_string(e, "host", p)});
        }
    }
    if (const json* networks = get_array(c, "networks", path)) {
        for (std::size_t i = 0; i < networks->size(); ++i) {
            const json& n = (*networks)[i];
            auto p = element_path(path + ".networks", i);
            if (!n.is_object()) bad_field(p, "an object");
            LimaNetwork network;
            network.lima = get_string(n, "lima", p);
            network.socket = get_string(n, "socket", p);
            network.vz_nat = get_optional_bool(n, "vzNAT", p).value_or(false);
            network.interface = get_string(n, "interface", p);
            config.networks.push_back(std::move(network));
        }
    }
    if (const json* env = get_object(c, "env", path)) {
        for (const auto& [key, value] : env->items()) {
            if (!value.is_string()) bad_field(path + ".env." + key, "a string");
            config.env[key] = value.get<std::string>();
        }
    }
    config.propagate_proxy_env = get_optional_bool(c, "propagateProxyEnv", path);
    if (const json* resolver = get_object(c, "hostResolver", path)) {
        config.host_resolver_enabled = get_optional_bool(*resolver, "enabled", path + ".hostResolver");
    }
    if (const json* dns = get_array(c, "dns", path)) {
        for (std::size_t i = 0; i < dns->size(); ++i) {
            if (!(*dns)[i].is_string()) bad_field(element_path(path + ".dns", i), "a string");
            config.dns.push_back((*dns)[i].get<std::string>());
        }
    }
    if (const json* images = get_array(c, "images", path)) {
        for (std::size_t i = 0; i < images->size(); ++i) {
            const json& img = (*images)[i];
            if (!img.is_object()) bad_field(element_path(path + ".images", i), "an object");
            config.image_locations.push_back(get_string(img, "location", element_path(path + ".images", i)));
        }
    }
    return config;
}

}  // namespace

LimaInstance parse_instance_json(std::string_view line, const std::string& home) {
    json doc = json::parse(line, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
        throw Error(
            "cannot read `limactl list --json`: a line is not a JSON object: " + std::string(line.substr(0, 120)),
            "check that limactl is Lima v1.0 or later (`limactl --version`)");
    }
    LimaInstance inst;
    inst.name = get_string(doc, "name", "");
    if (inst.name.empty()) bad_field(".name", "a non-empty string");
    const std::string path = inst.name;
    inst.status = get_string(doc, "status", path);
    inst.dir = get_string(doc, "dir", path);
    inst.vm_type = get_string(doc, "vmType", path);
    inst.arch = get_string(doc, "arch", path);
    inst.cpus = static_cast<int>(get_int(doc, "cpus", path));
    inst.memory = get_int(doc, "memory", path);
    inst.disk = get_int(doc, "disk", path);
    inst.ssh_local_port = static_cast<int>(get_int(doc, "sshLocalPort", path));
    inst.host_agent_pid = static_cast<int>(get_int(doc, "hostAgentPID", path));
    if (const json* errors = get_array(doc, "errors", path)) {
        for (const auto& e : *errors) inst.errors.push_back(e.is_string() ? e.get<std::string>() : e.dump());
    }
    if (const json* config = get_object(doc, "config", path)) {
        inst.config = parse_config(*config, home);
        inst.has_config = true;
    }
    if (inst.config.vm_type.empty()) inst.config.vm_type = inst.vm_type;
    if (inst.vm_type.empty()) inst.vm_type = inst.config.vm_type;
    return inst;
}

std::vector<LimaInstance> parse_instance_list(std::string_view output, const std::string& home) {
    std::vector<LimaInstance> result;
    std::size_t start = 0;
    while (start < output.size()) {
        auto end = output.find('\n', start);
        if (end == std::string_view::npos) end = output.size();
        auto line = output.substr(start, end - start);
        if (line.find_first_not_of(" \t\r") != std::string_view::npos)
            result.push_back(parse_instance_json(line, home));
        start = end + 1;
    }
    return result;
}

}  // namespace agentctl::provider::lima
