#include "provider/lima/lima_state.hpp"

#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "provider/lima/lima_paths.hpp"

namespace agentctl::provider::lima {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& field, const std::string& what) {
    throw Error(path + ": field " + field + ": " + what,
                "the file is written by agentctl; restore it or run `agentctl delete NAME --force` and create the "
                "sandbox again");
}

template <typename T>
T read(const json& doc, const char* key, const std::string& path, T fallback) {
    auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) return fallback;
    try {
        return it->get<T>();
    } catch (const json::exception&) {
        bad(path, key, "has the wrong type");
    }
}

std::uint16_t read_port(const json& doc, const char* key, const std::string& path) {
    int value = read<int>(doc, key, path, 0);
    if (value < 0 || value > 65535) bad(path, key, "is not a port number");
    return static_cast<std::uint16_t>(value);
}

}  // namespace

std::string state_to_json(const LimaState& s) {
    json mounts = json::array();
    for (const auto& m : s.mounts) {
        mounts.push_back(
            {{"hostPath", m.host_path}, {"guestPath", m.guest_path}, {"writable", m.writable}, {"origin", m.origin}});
    }
    json ports = json::array();
    for (const auto& p : s.ports) {
        ports.push_back(
            {{"listen", p.listen_address}, {"host", p.host_port}, {"guest", p.guest_port}, {"protocol", p.protocol}});
    }
    json doc = {
        {"version", 1},
        {"name", s.name},
        {"image", s.image},
        {"profiles", s.profiles},
        {"createdAt", s.created_at},
        {"user", s.user},
        {"unrestricted", s.unrestricted},
        {"dnsDisabled", s.dns_disabled},
        {"agent", s.agent},
        {"agentInstalled", s.agent_installed},
        {"secretsInstalled", s.secrets_installed},
        {"sshPort", s.ssh_port},
        {"proxyPort", s.proxy_port},
        {"hostagentPid", s.hostagent_pid},
        {"confinement", to_string(s.confinement)},
        {"mounts", mounts},
        {"ports", ports},
    };
    return doc.dump(2) + "\n";
}

LimaState state_from_json(const std::string& text, const std::string& path) {
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) bad(path, "(document)", "is not a JSON object");
    if (read<int>(doc, "version", path, 0) != 1) bad(path, "version", "must be 1");
    LimaState s;
    s.name = read<std::string>(doc, "name", path, "");
    s.image = read<std::string>(doc, "image", path, "");
    s.profiles = read<std::vector<std::string>>(doc, "profiles", path, {});
    s.created_at = read<std::string>(doc, "createdAt", path, "");
    s.user = read<std::string>(doc, "user", path, "agent");
    s.unrestricted = read<bool>(doc, "unrestricted", path, false);
    s.dns_disabled = read<bool>(doc, "dnsDisabled", path, false);
    s.agent = read<std::string>(doc, "agent", path, "");
    s.agent_installed = read<bool>(doc, "agentInstalled", path, false);
    s.secrets_installed = read<bool>(doc, "secretsInstalled", path, false);
    s.ssh_port = read_port(doc, "sshPort", path);
    s.proxy_port = read_port(doc, "proxyPort", path);
    s.hostagent_pid = read<int>(doc, "hostagentPid", path, 0);
    s.confinement = parse_confinement(read<std::string>(doc, "confinement", path, ""));
    if (auto it = doc.find("mounts"); it != doc.end() && it->is_array()) {
        for (std::size_t i = 0; i < it->size(); ++i) {
            const json& m = (*it)[i];
            auto field = "mounts[" + std::to_string(i) + "]";
            if (!m.is_object()) bad(path, field, "is not an object");
            Mount mount;
            mount.host_path = read<std::string>(m, "hostPath", path, "");
            mount.guest_path = read<std::string>(m, "guestPath", path, "");
            mount.writable = read<bool>(m, "writable", path, false);
            mount.origin = read<std::string>(m, "origin", path, "");
            if (mount.host_path.empty() || mount.guest_path.empty()) bad(path, field, "needs hostPath and guestPath");
            s.mounts.push_back(std::move(mount));
        }
    }
    if (auto it = doc.find("ports"); it != doc.end() && it->is_array()) {
        for (const json& p : *it) {
            PortForward port;
            port.listen_address = read<std::string>(p, "listen", path, "127.0.0.1");
            port.host_port = read_port(p, "host", path);
            port.guest_port = read_port(p, "guest", path);
            port.protocol = read<std::string>(p, "protocol", path, "tcp");
            s.ports.push_back(std::move(port));
        }
    }
    if (s.name.empty()) bad(path, "name", "is missing");
    return s;
}

std::optional<LimaState> load_state(const std::string& state_dir, const std::string& name) {
    auto path = state_file_path(state_dir, name);
    auto text = core::read_file_if_exists(path);
    if (!text) return std::nullopt;
    return state_from_json(*text, path.string());
}

void save_state(const std::string& state_dir, const LimaState& state) {
    core::write_file_atomic(state_file_path(state_dir, state.name), state_to_json(state));
}

}  // namespace agentctl::provider::lima
