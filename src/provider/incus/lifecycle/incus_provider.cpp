// The Incus provider's factory, capability matrix and the helpers its verbs share.
#include "provider/incus/lifecycle/incus_provider.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agentctl/error.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"
#include "provider/incus/client/server.hpp"

namespace agentctl::provider::incus {

CapabilityMatrix capabilities(const HostPlatform&) {
    // Every part is implemented: everything is Supported but exec logs, which no part provides yet.
    auto matrix = IncusProvider::base_capabilities();
    matrix.set("logs.exec", CapabilityStatus::UnderDevelopment,
               "structured exec logs are not built yet for any provider");
    return matrix;
}

std::unique_ptr<Provider> create(ProviderContext& context) {
    auto server = locate_server(context.settings, incus_config_dirs());
    spdlog::info("incus: using the {}", server.describe());
    std::unique_ptr<Client> client;
    if (context.preview) {
        // Reads go to the daemon when it answers, so the preview starts from the sandbox as it is.
        std::unique_ptr<Client> reader;
        try {
            reader = make_client(make_transport(server, 10), server.project);
        } catch (const Error& e) {
            spdlog::info("incus: the preview reads nothing from the server: {}", e.what());
        }
        client = make_preview_client(context.out, server.project, std::move(reader), server.remote);
    } else {
        client = make_client(make_transport(server), server.project);
    }
    auto host_side = [&context] {
        return context.preview ? make_preview_egress_host(context) : make_local_egress_host(context);
    };
    // The host firewall table and resolver serve the bridges only where they are this machine's.
    auto instance = make_instance_egress_host(context, *client, server.this_machine ? host_side() : nullptr);
    return std::make_unique<IncusProvider>(context, std::move(client), host_side(), std::move(instance),
                                           std::move(server));
}

IncusProvider::IncusProvider(ProviderContext& context, std::unique_ptr<Client> client,
                             std::unique_ptr<EgressHost> egress, std::unique_ptr<EgressHost> egress_instance,
                             Server server)
    : m_context(context),
      m_client(std::move(client)),
      m_egress(std::move(egress)),
      m_egress_instance(std::move(egress_instance)),
      m_api(*m_client),
      m_server(std::move(server)),
      m_project(m_server.project) {}

std::unique_ptr<Provider> make_provider(ProviderContext& context, std::unique_ptr<Client> client,
                                        std::unique_ptr<EgressHost> egress, Server server) {
    if (!egress) egress = make_preview_egress_host(context);
    auto instance = make_instance_egress_host(context, *client, make_preview_egress_host(context));
    return std::make_unique<IncusProvider>(context, std::move(client), std::move(egress), std::move(instance),
                                           std::move(server));
}

std::unique_ptr<Provider> make_provider(ProviderContext& context, std::unique_ptr<Client> client,
                                        std::unique_ptr<EgressHost> egress) {
    return make_provider(context, std::move(client), std::move(egress), Server{});
}

std::string IncusProvider::on_server(const std::string& name) const {
    return m_server.remote.empty() ? name : fmt::format("{}:{}", m_server.remote, name);
}

ProxyPlacement IncusProvider::placement_setting() const {
    return choose_proxy_placement(setting(m_context, config_key::k_proxy_placement), server_is_this_machine());
}

EgressHost& IncusProvider::egress(ProxyPlacement placement) const {
    return placement == ProxyPlacement::Instance ? *m_egress_instance : *m_egress;
}

EgressSite IncusProvider::site_of(const std::string& name, const SandboxRecord& record) {
    EgressSite site;
    site.sandbox = name;
    site.bridge = bridge_name(name);
    site.subnet = record.subnet.value_or(Ipv4Net{});
    site.image = record.image;
    site.host = record.host;
    return site;
}

std::string IncusProvider::backend_version() {
    const auto& info = m_api.server();
    if (!info.is_object()) return {};  // preview
    const auto& environment = info.value("environment", Json::object());
    const auto server = environment.value("server", std::string("incus"));
    const auto version = environment.value("server_version", std::string());
    if (version.empty()) return {};
    return fmt::format("{} {}", server == "incus" ? "Incus" : server, version);
}

Instance IncusProvider::require_instance(const std::string& name) { return checked(name, m_api.instance(name)); }

Instance IncusProvider::checked(const std::string& name, std::optional<Instance> instance) const {
    if (!instance) {
        if (m_api.preview()) {
            // Preview: pretend a running sandbox with the default user, so the
            // lines that follow are the ones a real run would send.
            Instance pretended;
            pretended.name = name;
            pretended.status = "Running";
            pretended.status_code = IncusStatus::Running;
            pretended.type = Isolation::Vm;
            pretended.config = {{std::string(key::k_managed), "true"},
                                {std::string(key::k_user), "agent"},
                                {std::string(key::k_uid), std::to_string(k_default_guest_uid)},
                                {std::string(key::k_gid), std::to_string(k_default_guest_uid)},
                                {std::string(key::k_home), "/home/agent"},
                                {std::string(key::k_shell), "/bin/bash"}};
            return pretended;
        }
        throw Error(fmt::format("no sandbox named \"{}\" in Incus", name), "`agentctl list` shows the sandboxes");
    }
    const auto marks = read_instance_marks(*instance);
    if (!marks.managed) {
        throw Error(fmt::format("the Incus instance \"{}\" was not created by agentctl", name),
                    "agentctl only acts on its own sandboxes; use the incus client for other instances");
    }
    if (marks.is_companion()) {
        const auto& sandbox = marks.sandbox;
        throw Error(
            fmt::format("the Incus instance \"{}\" is the egress proxy of sandbox {}, not a sandbox", name, sandbox),
            fmt::format("act on the sandbox (agentctl status {}); its proxy follows it", sandbox));
    }
    return *instance;
}

void IncusProvider::set_records(const std::string& name, const std::map<std::string, std::string>& records) {
    m_api.patch_instance_config(name, Json(records));
}

}  // namespace agentctl::provider::incus
