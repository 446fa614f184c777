#include "provider/incus/client/instance.hpp"

#include <limits>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/client/payloads.hpp"

namespace agentctl::provider::incus {
namespace {

// Reads one answer about `subject` ("instance foo", "the state of instance
// foo"); `path` is the field being read, for errors.
class Reader {
public:
    explicit Reader(std::string subject) : m_subject(std::move(subject)) {}

    [[noreturn]] void bad(const std::string& path, std::string_view why) const {
        throw Error(
            fmt::format("the Incus server's answer about {} is malformed: field \"{}\" {}", m_subject, path, why),
            "agentctl reads Incus's API as Incus 6 documents it; check the server (incus info) and that "
            "nothing between agentctl and it rewrites its answers");
    }

    // The member `field` of `object`; null when absent.
    static const Json& member(const Json& object, std::string_view field) {
        static const Json absent;
        const auto it = object.find(std::string(field));
        return it == object.end() ? absent : *it;
    }

    std::string text(const Json& value, const std::string& path, bool required = false) const {
        if (value.is_null() && !required) return {};
        if (!value.is_string()) bad(path, value.is_null() ? "is missing" : "is not text");
        return value.get<std::string>();
    }

    std::int64_t number(const Json& value, const std::string& path) const {
        if (value.is_null()) return 0;
        if (!value.is_number_integer()) bad(path, "is not a whole number");
        return value.get<std::int64_t>();
    }

    bool flag(const Json& value, const std::string& path) const {
        if (value.is_null()) return false;
        if (!value.is_boolean()) bad(path, "is not true or false");
        return value.get<bool>();
    }

    // An object (null or absent: an empty one); each member read by `each(key, value, path)`.
    template <typename Each>
    void object(const Json& value, const std::string& path, Each each) const {
        if (value.is_null()) return;
        if (!value.is_object()) bad(path, "is not an object");
        for (const auto& [key, item] : value.items()) each(key, item, path + "." + key);
    }

    template <typename Each>
    void list(const Json& value, const std::string& path, Each each) const {
        if (value.is_null()) return;
        if (!value.is_array()) bad(path, "is not a list");
        for (std::size_t i = 0; i < value.size(); ++i) each(value[i], fmt::format("{}[{}]", path, i));
    }

    ConfigMap config(const Json& value, const std::string& path) const {
        ConfigMap out;
        object(value, path, [&](const std::string& key, const Json& item, const std::string& at) {
            out.emplace(key, text(item, at, true));
        });
        return out;
    }

    DeviceMap devices(const Json& value, const std::string& path) const {
        DeviceMap out;
        object(value, path, [&](const std::string& key, const Json& item, const std::string& at) {
            if (!item.is_object()) bad(at, "is not an object");
            out.emplace(key, config(item, at));
        });
        return out;
    }

private:
    std::string m_subject;
};

// The name in an answer, if it has a text one (for the errors about the rest).
std::string name_in(const Json& answer) {
    const auto& name = Reader::member(answer, "name");
    return name.is_string() ? name.get<std::string>() : std::string();
}

InstanceState read_state(const Reader& in, const Json& answer, const std::string& at) {
    if (!answer.is_object()) in.bad(at.empty() ? "(the answer)" : at, "is not an object");
    const auto field = [&](std::string_view name) {
        return at.empty() ? std::string(name) : at + "." + std::string(name);
    };
    InstanceState state;
    state.status = in.text(Reader::member(answer, "status"), field("status"));
    state.status_code = incus_status_named(state.status);
    const auto pid = in.number(Reader::member(answer, "pid"), field("pid"));
    if (pid > std::numeric_limits<int>::max()) in.bad(field("pid"), fmt::format("is {}, not a pid", pid));
    state.pid = pid > 0 ? static_cast<int>(pid) : 0;  // a stopped container's is -1
    state.processes = in.number(Reader::member(answer, "processes"), field("processes"));
    const auto& memory = Reader::member(answer, "memory");
    if (!memory.is_null() && !memory.is_object()) in.bad(field("memory"), "is not an object");
    if (memory.is_object()) {
        state.memory_usage = in.number(Reader::member(memory, "usage"), field("memory.usage"));
        state.memory_usage_peak = in.number(Reader::member(memory, "usage_peak"), field("memory.usage_peak"));
    }
    in.object(Reader::member(answer, "network"), field("network"),
              [&](const std::string& key, const Json& item, const std::string& path) {
                  if (!item.is_object()) in.bad(path, "is not an object");
                  InstanceInterface nic;
                  nic.hwaddr = in.text(Reader::member(item, "hwaddr"), path + ".hwaddr");
                  nic.host_name = in.text(Reader::member(item, "host_name"), path + ".host_name");
                  nic.state = in.text(Reader::member(item, "state"), path + ".state");
                  nic.type = in.text(Reader::member(item, "type"), path + ".type");
                  in.list(
                      Reader::member(item, "addresses"), path + ".addresses",
                      [&](const Json& address, const std::string& where) {
                          if (!address.is_object()) in.bad(where, "is not an object");
                          const auto part = [&](std::string_view name) {
                              return in.text(Reader::member(address, name), where + "." + std::string(name), true);
                          };
                          nic.addresses.push_back({part("family"), part("address"), part("netmask"), part("scope")});
                      });
                  state.network.emplace(key, std::move(nic));
              });
    return state;
}

}  // namespace

std::string Instance::config_value(std::string_view key) const {
    const auto it = config.find(key);
    return it == config.end() ? std::string() : it->second;
}

Instance parse_instance(const Json& answer) {
    const auto name = name_in(answer);
    const Reader in(name.empty() ? std::string("an instance without a name") : "instance " + name);
    if (!answer.is_object()) in.bad("(the answer)", "is not an object");
    const auto member = [&](std::string_view field) -> const Json& { return Reader::member(answer, field); };
    Instance instance;
    instance.name = in.text(member("name"), "name", true);
    const auto type = in.text(member("type"), "type", true);
    if (type == instance_type_name(Isolation::Vm)) {
        instance.type = Isolation::Vm;
    } else if (type != instance_type_name(Isolation::Container)) {
        in.bad("type", fmt::format("is \"{}\", neither {} nor {}", type, instance_type_name(Isolation::Container),
                                   instance_type_name(Isolation::Vm)));
    }
    instance.status = in.text(member("status"), "status", true);
    instance.status_code = incus_status_named(instance.status);
    instance.project = in.text(member("project"), "project");
    instance.location = in.text(member("location"), "location");
    instance.architecture = in.text(member("architecture"), "architecture");
    instance.created_at = in.text(member("created_at"), "created_at");
    instance.description = in.text(member("description"), "description");
    instance.ephemeral = in.flag(member("ephemeral"), "ephemeral");
    instance.stateful = in.flag(member("stateful"), "stateful");
    in.list(member("profiles"), "profiles",
            [&](const Json& item, const std::string& at) { instance.profiles.push_back(in.text(item, at, true)); });
    instance.config = in.config(member("config"), "config");
    instance.expanded_config = in.config(member("expanded_config"), "expanded_config");
    instance.devices = in.devices(member("devices"), "devices");
    instance.expanded_devices = in.devices(member("expanded_devices"), "expanded_devices");
    if (const auto& state = member("state"); !state.is_null()) instance.state = read_state(in, state, "state");
    return instance;
}

InstanceState parse_instance_state(const Json& answer, std::string_view instance) {
    return read_state(Reader(fmt::format("the state of instance {}", instance)), answer, "");
}

InstanceSnapshot parse_instance_snapshot(const Json& answer, std::string_view instance) {
    const Reader in(fmt::format("a snapshot of instance {}", instance));
    if (!answer.is_object()) in.bad("(the answer)", "is not an object");
    InstanceSnapshot snapshot;
    snapshot.name = in.text(Reader::member(answer, "name"), "name", true);
    snapshot.created_at = in.text(Reader::member(answer, "created_at"), "created_at");
    snapshot.stateful = in.flag(Reader::member(answer, "stateful"), "stateful");
    snapshot.config = in.config(Reader::member(answer, "config"), "config");
    return snapshot;
}

Json instance_put_body(const Instance& instance) {
    Json devices = Json::object();
    for (const auto& [name, device] : instance.devices) devices[name] = Json(device);
    Json body{{"config", Json(instance.config)}, {"devices", std::move(devices)},
              {"profiles", instance.profiles},   {"ephemeral", instance.ephemeral},
              {"stateful", instance.stateful},   {"description", instance.description}};
    // An instance always has one; Incus refuses an empty one.
    if (!instance.architecture.empty()) body["architecture"] = instance.architecture;
    return body;
}

}  // namespace agentctl::provider::incus
