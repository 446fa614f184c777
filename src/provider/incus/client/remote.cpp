// Reading the `incus` client's remotes (see remote.hpp for the contract).
#include "provider/incus/client/remote.hpp"

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "provider/incus/client/client.hpp"

namespace agentctl::provider::incus {
namespace {

namespace fs = std::filesystem;

bool file_exists(const fs::path& path) {
    std::error_code ec;
    return fs::exists(path, ec);
}

std::string scalar(const YAML::Node& node, const char* key) {
    const auto value = node[key];
    return value && value.IsScalar() ? value.as<std::string>() : std::string();
}

// The `remotes:` of one config.yml; an absent file has none.
std::map<std::string, Remote> read_file(const fs::path& path, bool global) {
    std::map<std::string, Remote> remotes;
    auto text = core::read_file_if_exists(path);
    if (!text) return remotes;
    YAML::Node root;
    try {
        root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
        throw Error(fmt::format("{}:{}:{}: {}", path.string(), e.mark.line + 1, e.mark.column + 1, e.msg),
                    "this is the incus client's configuration: `incus remote list` shows what it makes of it");
    }
    if (!root || root.IsNull()) return remotes;
    const auto list = root.IsMap() ? root["remotes"] : YAML::Node();
    if (!list || list.IsNull()) return remotes;
    if (!list.IsMap()) {
        throw Error(
            fmt::format("{}:{}: `remotes` must be a mapping of remote names", path.string(), list.Mark().line + 1));
    }
    for (const auto& entry : list) {
        Remote remote;
        remote.name = entry.first.as<std::string>();
        const auto& body = entry.second;
        if (!body.IsMap()) {
            throw Error(fmt::format("{}:{}: remote \"{}\" must be a mapping (addr, protocol, ...)", path.string(),
                                    body.Mark().line + 1, remote.name));
        }
        remote.addr = scalar(body, "addr");
        remote.protocol = scalar(body, "protocol");
        if (remote.protocol.empty()) remote.protocol = "incus";  // file.go: "Fill in defaults"
        remote.auth_type = scalar(body, "auth_type");
        remote.project = scalar(body, "project");
        remote.is_public = scalar(body, "public") == "true";
        remote.global = global;
        remotes[remote.name] = std::move(remote);
    }
    return remotes;
}

std::string known_names(const std::map<std::string, Remote>& remotes) {
    std::string names;
    for (const auto& [name, remote] : remotes) {
        if (remote.is_public || remote.protocol != "incus") continue;  // not servers agentctl can use
        names += (names.empty() ? "" : ", ") + name;
    }
    return names;
}

}  // namespace

IncusConfigDirs incus_config_dirs(const std::map<std::string, std::string>* env) {
    IncusConfigDirs dirs;
    dirs.user = env_value(env, "INCUS_CONF");
    if (dirs.user.empty()) {
        const auto home = env_value(env, "HOME");
        dirs.user = (home.empty() ? std::string("/root") : home) + "/.config/incus";
    }
    dirs.global = env_value(env, "INCUS_GLOBAL_CONF");
    if (dirs.global.empty()) dirs.global = "/etc/incus";
    dirs.project = env_value(env, "INCUS_PROJECT");
    return dirs;
}

std::map<std::string, Remote> load_remotes(const IncusConfigDirs& dirs) {
    auto remotes = read_file(fs::path(dirs.user) / "config.yml", false);
    for (auto& [name, remote] : read_file(fs::path(dirs.global) / "config.yml", true)) {
        remotes.try_emplace(name, std::move(remote));
    }
    // The static remote: always the local unix socket (its project may be set).
    Remote local;
    local.name = "local";
    local.addr = "unix://";
    if (auto it = remotes.find("local"); it != remotes.end()) local.project = it->second.project;
    remotes["local"] = std::move(local);
    return remotes;
}

HostPort parse_https_addr(const std::string& remote, const std::string& addr) {
    constexpr std::string_view scheme = "https://";
    auto bad = [&](std::string_view why) {
        return Error(fmt::format("remote \"{}\": address \"{}\" {}", remote, addr, why),
                     "fix it with `incus remote set-url " + remote + " https://HOST:8443`");
    };
    if (!std::string_view(addr).starts_with(scheme)) throw bad("is not an https:// URL");
    std::string rest = addr.substr(scheme.size());
    if (auto slash = rest.find('/'); slash != std::string::npos) {
        if (rest.find_first_not_of('/', slash) != std::string::npos) throw bad("has a path");
        rest.resize(slash);
    }
    HostPort out;
    if (rest.starts_with("[")) {
        const auto close = rest.find(']');
        if (close == std::string::npos) throw bad("has an unclosed '['");
        out.host = rest.substr(1, close - 1);
        const auto after = rest.substr(close + 1);
        if (!after.empty() && after.front() != ':') throw bad("has text after ']'");
        out.port = after.empty() ? std::string() : after.substr(1);
    } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
        out.host = rest.substr(0, colon);
        out.port = rest.substr(colon + 1);
    } else {
        out.host = rest;
    }
    if (out.port.empty()) out.port = "8443";  // the port Incus listens on by default
    const bool numeric = out.port.size() <= 5 && out.port.find_first_not_of("0123456789") == std::string::npos;
    if (out.host.empty()) throw bad("names no host");
    if (!numeric || std::stoi(out.port) < 1 || std::stoi(out.port) > 65535) throw bad("has a bad port");
    return out;
}

RemoteTarget resolve_remote(const std::string& name, const IncusConfigDirs& dirs) {
    const auto remotes = load_remotes(dirs);
    const auto file = (fs::path(dirs.user) / "config.yml").string();
    auto it = remotes.find(name);
    if (it == remotes.end()) {
        throw Error(fmt::format("unknown Incus remote \"{}\" (known: {}; from {})", name, known_names(remotes), file),
                    fmt::format("add it with `incus remote add {} https://HOST:8443` (or pick a known one); "
                                "`incus remote list` shows them",
                                name));
    }
    const auto& remote = it->second;
    if (remote.is_public || remote.protocol != "incus") {
        throw Error(fmt::format("Incus remote \"{}\" is an image server ({}), not an Incus server", name,
                                remote.is_public ? "public" : remote.protocol),
                    "name a remote added with `incus remote add NAME https://HOST:8443`");
    }
    if (remote.auth_type == "oidc") {
        throw Error(fmt::format("Incus remote \"{}\" uses OIDC authentication, which agentctl does not support", name),
                    "add the server with a TLS client certificate: incus remote add NAME https://HOST:8443 "
                    "--auth-type=tls");
    }
    RemoteTarget target;
    target.name = name;
    target.project = remote.project == "default" ? std::string() : remote.project;
    if (remote.addr.starts_with("unix:")) {
        auto path = remote.addr.substr(5);
        if (path.starts_with("//")) path = path.substr(2);
        target.socket = path;
        return target;
    }
    // Newer incus clients (7.x, shared/cliconfig/remote.go: Addrs) accept a
    // comma-separated list of addresses of one server and try them in turn;
    // agentctl uses the first.
    const auto first = remote.addr.substr(0, remote.addr.find(','));
    const auto where = parse_https_addr(name, first.substr(0, first.find_last_not_of(' ') + 1));
    HttpsRemote https;
    https.name = name;
    https.host = where.host;
    https.port = where.port;
    https.project = target.project;
    const fs::path user(dirs.user);
    https.server_cert = ((remote.global ? fs::path(dirs.global) : user) / "servercerts" / (name + ".crt")).string();
    const auto own_cert = user / "clientcerts" / (name + ".crt");
    const auto own_key = user / "clientcerts" / (name + ".key");
    if (file_exists(own_cert) && file_exists(own_key)) {
        https.client_cert = own_cert.string();
        https.client_key = own_key.string();
        https.client_ca = (user / "clientcerts" / (name + ".ca")).string();
    } else {
        https.client_cert = (user / "client.crt").string();
        https.client_key = (user / "client.key").string();
        https.client_ca = (user / "client.ca").string();
    }
    if (!file_exists(https.client_cert) || !file_exists(https.client_key)) {
        throw Error(fmt::format("Incus remote \"{}\" needs a TLS client certificate and key: {} and {} are missing",
                                name, https.client_cert, https.client_key),
                    "`incus remote add` creates them (or copy your client.crt and client.key to " + dirs.user +
                        "), and the server must trust the certificate: incus config trust add-certificate");
    }
    target.https = std::move(https);
    return target;
}

}  // namespace agentctl::provider::incus
