// Choosing the Incus server, and the one decision whether it is this machine.
#include "provider/incus/client/server.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/lifecycle/settings.hpp"

namespace agentctl::provider::incus {

bool is_this_machine(const std::string& host, policy::Resolver& resolver,
                     std::span<const policy::IpAddress> own_addresses) {
    std::vector<policy::IpAddress> addresses;
    if (auto literal = policy::parse_ip_literal(host)) {
        addresses.push_back(*literal);
    } else {
        addresses = resolver.resolve(host);
    }
    if (addresses.empty()) return false;
    return std::all_of(addresses.begin(), addresses.end(),
                       [&](const policy::IpAddress& address) { return is_this_machine(address, own_addresses); });
}

bool is_this_machine(const policy::IpAddress& address, std::span<const policy::IpAddress> own_addresses) {
    return policy::classify(address) == policy::AddressClass::Loopback ||
           std::find(own_addresses.begin(), own_addresses.end(), address) != own_addresses.end();
}

std::string Server::describe() const {
    if (!project.empty()) {
        Server without = *this;
        without.project.clear();
        return fmt::format("{}, project {}", without.describe(), project);
    }
    if (https) {
        const bool v6 = https->host.find(':') != std::string::npos;
        return fmt::format("remote {} at https://{}:{} ({})", remote, v6 ? "[" + https->host + "]" : https->host,
                           https->port, this_machine ? "this machine" : "another machine");
    }
    if (!socket) return "local daemon";
    const auto where = fmt::format("unix socket {} (found via {})", socket->path, socket->source);
    return remote.empty() ? where : fmt::format("remote {}: {}", remote, where);
}

namespace {

// --project (or incus.project) wins over $INCUS_PROJECT, which wins over the
// remote's project; `default` is Incus's own default project, which needs no
// ?project= at all.
void apply_project_setting(Server& server, const std::map<std::string, std::string>& settings,
                           const IncusConfigDirs& dirs) {
    auto it = settings.find(std::string(config_key::k_project));
    std::string chosen = it == settings.end() ? std::string() : it->second;
    if (chosen.empty() && !dirs.project.empty()) {
        const auto keys = incus::settings();
        const auto key =
            std::find_if(keys.begin(), keys.end(), [](const auto& k) { return k.name == config_key::k_project; });
        if (auto problem = key->validate(dirs.project); !problem.empty()) {
            throw Error("INCUS_PROJECT " + problem, "set INCUS_PROJECT to an existing project, or unset it");
        }
        chosen = dirs.project;
    }
    if (chosen.empty()) return;
    server.project = chosen == "default" ? std::string() : chosen;
}

Server locate(const std::map<std::string, std::string>& settings, const IncusConfigDirs& dirs) {
    Server server;
    auto it = settings.find(std::string(config_key::k_remote));
    if (it != settings.end()) server.remote = it->second;
    if (server.remote.empty()) {
        server.socket = find_socket();
        server.project = server.socket->project;
        return server;
    }
    auto target = resolve_remote(server.remote, dirs);
    server.project = target.project;
    if (target.socket) {
        if (target.socket->empty()) {
            server.socket = find_socket();
        } else {
            server.socket = SocketLocation{*target.socket, {}, "remote " + server.remote};
        }
        if (server.project.empty()) server.project = server.socket->project;
        return server;
    }
    server.https = std::move(target.https);
    auto resolver = policy::make_system_resolver();
    server.this_machine = is_this_machine(server.https->host, *resolver, policy::host_own_addresses());
    return server;
}

}  // namespace

Server locate_server(const std::map<std::string, std::string>& settings, const IncusConfigDirs& dirs) {
    auto server = locate(settings, dirs);
    apply_project_setting(server, settings, dirs);
    return server;
}

std::unique_ptr<Transport> make_transport(const Server& server, int timeout_seconds) {
    if (server.https) return make_tls_transport(*server.https, timeout_seconds);
    return make_unix_transport(server.socket->path, timeout_seconds);
}

}  // namespace agentctl::provider::incus
