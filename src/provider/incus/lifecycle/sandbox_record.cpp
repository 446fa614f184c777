#include "provider/incus/lifecycle/sandbox_record.hpp"

#include <charconv>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/lifecycle/naming.hpp"

namespace agentctl::provider::incus {
namespace {

constexpr std::string_view k_vm = "vm";
constexpr std::string_view k_container = "container";

// Reads one instance's config, each key once; `what` is the fix a damaged
// value calls for.
class ConfigReader {
public:
    ConfigReader(const Instance& instance, std::string what) : m_instance(instance), m_what(std::move(what)) {}

    [[nodiscard]] const std::string& name() const { return m_instance.name; }
    [[nodiscard]] std::string text(std::string_view key) const { return m_instance.config_value(key); }

    [[noreturn]] void bad(std::string_view key, std::string_view why) const {
        throw Error(fmt::format("the Incus instance {}: {} is not what agentctl writes: {}", name(), key, why), m_what);
    }

    bool boolean(std::string_view key) const {
        const auto value = text(key);
        if (value.empty() || value == "false") return false;
        if (value != "true") bad(key, fmt::format("\"{}\" is not true or false", value));
        return true;
    }

    std::optional<int> number(std::string_view key) const {
        const auto value = text(key);
        if (value.empty()) return std::nullopt;
        int out = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
        if (ec != std::errc() || end != value.data() + value.size() || out < 0) {
            bad(key, fmt::format("\"{}\" is not a whole number", value));
        }
        return out;
    }

    // The JSON value of `key`; `fallback` when absent.
    Json json(std::string_view key, Json fallback) const {
        const auto value = text(key);
        if (value.empty()) return fallback;
        auto parsed = Json::parse(value, nullptr, false);
        if (parsed.is_discarded()) bad(key, "its value is not JSON");
        return parsed;
    }

    std::vector<std::string> strings(std::string_view key) const {
        const auto list = json(key, Json::array());
        std::vector<std::string> out;
        if (!list.is_array()) bad(key, "its value is not a JSON list of strings");
        for (const auto& item : list) {
            if (!item.is_string()) bad(key, "its value is not a JSON list of strings");
            out.push_back(item.get<std::string>());
        }
        return out;
    }

    // One object of a JSON list under `key`, its members read strictly.
    struct Item {
        const ConfigReader& config;
        std::string_view key;
        std::size_t index;
        const Json& object;

        [[noreturn]] void bad(std::string_view why) const { config.bad(key, fmt::format("item {} {}", index, why)); }
        // A text member; `fallback` when it has none.
        std::string text(const char* field, std::optional<std::string> fallback = std::nullopt) const {
            auto it = object.find(field);
            if (it == object.end() && fallback) return *fallback;
            if (it == object.end() || !it->is_string()) bad(fmt::format("has no text \"{}\"", field));
            return it->get<std::string>();
        }
        bool flag(const char* field) const {
            auto it = object.find(field);
            if (it == object.end()) return false;
            if (!it->is_boolean()) bad(fmt::format("has \"{}\" that is not true or false", field));
            return it->get<bool>();
        }
        std::uint16_t port(const char* field) const {
            auto it = object.find(field);
            if (it == object.end() || !it->is_number_unsigned() ||
                it->get<std::uint64_t>() > std::numeric_limits<std::uint16_t>::max()) {
                bad(fmt::format("has no port number \"{}\"", field));
            }
            return it->get<std::uint16_t>();
        }
    };

    // The JSON list of objects under `key`, each made by `make(Item)`.
    template <typename Make>
    auto items(std::string_view key, Make make) const {
        const auto list = json(key, Json::array());
        if (!list.is_array()) bad(key, "its value is not a JSON list");
        std::vector<decltype(make(std::declval<Item>()))> out;
        for (std::size_t i = 0; i < list.size(); ++i) {
            if (!list[i].is_object()) bad(key, fmt::format("item {} is not a JSON object", i));
            out.push_back(make(Item{*this, key, i, list[i]}));
        }
        return out;
    }

private:
    const Instance& m_instance;
    std::string m_what;
};

std::string recreate_hint(const std::string& name) {
    return fmt::format(
        "agentctl writes this key when it creates the sandbox: delete it and create it again "
        "(agentctl delete {} --force)",
        name);
}

void read_marks(const ConfigReader& config, InstanceMarks& marks) {
    marks.name = config.name();
    marks.managed = config.boolean(key::k_managed);
    marks.role = config.text(key::k_role);
    marks.sandbox = config.text(key::k_sandbox);
    marks.create_pending = config.boolean(key::k_create_pending);
    marks.given_name = config.text(key::k_name);
}

Isolation read_isolation(const ConfigReader& config, const Instance& instance) {
    const auto value = config.text(key::k_isolation);
    if (value.empty()) return instance.type;
    if (value != k_vm && value != k_container)
        config.bad(key::k_isolation, fmt::format("\"{}\" is not {} or {}", value, k_vm, k_container));
    return value == k_vm ? Isolation::Vm : Isolation::Container;
}

std::optional<GuestUser> read_guest(const ConfigReader& config) {
    const auto uid = config.number(key::k_uid);
    if (!uid) return std::nullopt;
    const auto gid = config.number(key::k_gid);
    if (!gid) config.bad(key::k_gid, "it is missing beside " + std::string(key::k_uid));
    GuestUser user{config.text(key::k_user), *uid, *gid, config.text(key::k_home), config.text(key::k_shell)};
    if (user.shell.empty()) user.shell = "/bin/sh";
    return user;
}

std::optional<policy::NetworkPolicy> read_network(const ConfigReader& config) {
    const auto document = config.json(key::k_network, nullptr);
    if (document.is_null()) return std::nullopt;
    try {
        return policy::from_policy_file(document);
    } catch (const std::exception& e) {  // agentctl::Error, or a JSON type the policy file never has
        config.bad(key::k_network, e.what());
    }
}

std::vector<Mount> read_mounts(const ConfigReader& config) {
    return config.items(key::k_mounts, [](const ConfigReader::Item& item) {
        return Mount{item.text("host_path"), item.text("guest_path"), item.flag("writable"), item.text("origin", "")};
    });
}

std::vector<PortForward> read_ports(const ConfigReader& config) {
    return config.items(key::k_ports, [](const ConfigReader::Item& item) {
        return PortForward{item.text("listen_address", "127.0.0.1"), item.port("host_port"), item.port("guest_port"),
                           item.text("protocol", "tcp")};
    });
}

std::vector<ProbeRecord> read_probes(const ConfigReader& config) {
    return config.items(key::k_confinement_probes, [](const ConfigReader::Item& item) {
        return ProbeRecord{item.text("name"), item.text("verdict"), item.text("detail", "")};
    });
}

template <typename Enum>
Enum read_word(const ConfigReader& config, std::string_view key, Enum fallback,
               std::initializer_list<std::pair<std::string_view, Enum>> words) {
    const auto value = config.text(key);
    if (value.empty()) return fallback;
    for (const auto& [word, out] : words) {
        if (value == word) return out;
    }
    std::string known;
    for (const auto& word : words) known += (known.empty() ? "" : " or ") + std::string(word.first);
    config.bad(key, fmt::format("\"{}\" is not {}", value, known));
}

}  // namespace

InstanceMarks read_instance_marks(const Instance& instance) {
    const auto& name = instance.name;
    const ConfigReader config(
        instance, fmt::format("set it right (incus config set {} KEY true, or incus config unset {} KEY), or "
                              "remove the instance with incus delete {}",
                              name, name, name));
    InstanceMarks marks;
    read_marks(config, marks);
    return marks;
}

Instance snapshot_as_instance(const Instance& instance, const InstanceSnapshot& snapshot) {
    Instance taken;
    const auto slash = snapshot.name.rfind('/');
    taken.name = instance.name + "/" + (slash == std::string::npos ? snapshot.name : snapshot.name.substr(slash + 1));
    taken.type = instance.type;
    taken.config = snapshot.config;
    taken.created_at = snapshot.created_at;
    return taken;
}

SandboxRecord read_sandbox_record(const Instance& instance) {
    const ConfigReader config(instance, recreate_hint(instance.name));
    SandboxRecord record;
    static_cast<InstanceMarks&>(record) = read_instance_marks(instance);
    record.isolation = read_isolation(config, instance);
    record.image = config.text(key::k_image);
    record.user = config.text(key::k_user);
    record.guest = read_guest(config);
    record.profiles = config.strings(key::k_profiles);
    record.network = read_network(config);
    record.mounts = read_mounts(config);
    record.ports = read_ports(config);
    record.packages = config.strings(key::k_packages);
    record.widenings = config.strings(key::k_widenings);
    record.agent = config.text(key::k_agent);
    record.agent_installed = config.boolean(key::k_agent_installed);
    record.bridge = config.text(key::k_bridge);
    record.acl = config.text(key::k_acl);
    if (const auto subnet = config.text(key::k_subnet); !subnet.empty()) {
        record.subnet = parse_ipv4_net(subnet);
        if (!record.subnet) config.bad(key::k_subnet, fmt::format("\"{}\" is not an IPv4 address/prefix", subnet));
    }
    record.resolver = read_word(config, key::k_resolver, BridgeResolver::Incus,
                                {{resolver_record(BridgeResolver::Host), BridgeResolver::Host},
                                 {resolver_record(BridgeResolver::Incus), BridgeResolver::Incus}});
    record.placement = read_word(config, key::k_egress, ProxyPlacement::Host,
                                 {{to_string(ProxyPlacement::Host), ProxyPlacement::Host},
                                  {to_string(ProxyPlacement::Instance), ProxyPlacement::Instance}});
    try {
        record.host = parse_host_record(Json(instance.config));
    } catch (const Error& e) {
        throw Error(fmt::format("the Incus instance {}: {}", record.name, e.what()), e.hint());
    }
    record.confinement = parse_confinement(config.text(key::k_confinement));
    record.evidence.checked_at = config.text(key::k_confinement_at);
    record.evidence.source = config.text(key::k_confinement_source);
    record.evidence.probes = read_probes(config);
    record.confinement_pid = config.number(key::k_confinement_pid).value_or(0);
    record.confinement_firewall = config.text(key::k_confinement_firewall);
    record.confinement_acl_chain = config.text(key::k_confinement_acl_chain);
    return record;
}

std::string_view isolation_record(Isolation isolation) { return isolation == Isolation::Vm ? k_vm : k_container; }

std::string mounts_record(const std::vector<Mount>& mounts) {
    Json list = Json::array();
    for (const auto& m : mounts) {
        list.push_back(
            {{"host_path", m.host_path}, {"guest_path", m.guest_path}, {"writable", m.writable}, {"origin", m.origin}});
    }
    return list.dump();
}

std::string ports_record(const std::vector<PortForward>& ports) {
    Json list = Json::array();
    for (const auto& p : ports) {
        list.push_back({{"listen_address", p.listen_address},
                        {"host_port", p.host_port},
                        {"guest_port", p.guest_port},
                        {"protocol", p.protocol}});
    }
    return list.dump();
}

std::string widenings_record(const SandboxSpec& spec) { return Json(widenings(spec)).dump(); }

std::string network_record(const policy::NetworkPolicy& network) { return policy::to_policy_file(network).dump(); }

std::string profiles_record(const std::vector<std::string>& profiles) { return Json(profiles).dump(); }

std::map<std::string, std::string> sandbox_record_config(const SandboxSpec& spec, const std::string& bridge,
                                                         const Ipv4Net& subnet, bool acl_attached) {
    return {{std::string(key::k_managed), "true"},
            {std::string(key::k_user), spec.user},
            {std::string(key::k_isolation), std::string(isolation_record(spec.isolation))},
            {std::string(key::k_image), spec.image},
            {std::string(key::k_profiles), profiles_record(spec.profiles)},
            {std::string(key::k_network), network_record(spec.network)},
            {std::string(key::k_mounts), mounts_record(spec.mounts)},
            {std::string(key::k_ports), ports_record(spec.ports)},
            {std::string(key::k_packages), Json(spec.packages).dump()},
            {std::string(key::k_widenings), widenings_record(spec)},
            {std::string(key::k_agent), spec.agent},
            {std::string(key::k_agent_installed), spec.agent.empty() ? "" : "false"},
            {std::string(key::k_bridge), bridge},
            {std::string(key::k_acl), acl_attached ? acl_name(spec.name) : ""},
            {std::string(key::k_subnet), subnet.host(1).to_string()}};
}

SandboxSpec widening_view(const SandboxRecord& record, const std::optional<policy::NetworkPolicy>& network) {
    SandboxSpec view;
    view.network = network ? *network : record.network.value_or(policy::NetworkPolicy{});
    view.mounts = record.mounts;
    view.ports = record.ports;
    view.isolation = record.isolation;
    return view;
}

}  // namespace agentctl::provider::incus
