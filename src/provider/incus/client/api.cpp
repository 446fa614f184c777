#include "provider/incus/client/api.hpp"

#include <cctype>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/client/cluster.hpp"

namespace agentctl::provider::incus {

namespace {

// How long Incus's momentary refusals of a network or ACL change are asked again.
constexpr std::chrono::seconds k_network_retry_budget{60};

}  // namespace

void retry_transient(const std::function<void()>& call, std::chrono::milliseconds budget) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    std::minstd_rand random(static_cast<unsigned>(::getpid()) ^
                            static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::chrono::milliseconds pause{100};
    for (;;) {
        try {
            call();
            return;
        } catch (const IncusError& e) {
            if (!e.transient()) throw;
            const auto wait = pause / 2 + std::chrono::milliseconds(random() % (pause.count() / 2 + 1));
            if (std::chrono::steady_clock::now() + wait >= deadline) throw;
            std::this_thread::sleep_for(wait);
            pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::seconds(2));
        }
    }
}

const std::vector<RequiredExtension>& required_extensions() {
    static const std::vector<RequiredExtension> extensions{
        {"instances", "the /1.0/instances API"},
        {"network_acl", "network ACLs (the sandbox's egress policy)"},
        {"network_bridge_acl", "ACLs on a managed bridge"},
        {"container_exec_recording", "non-interactive exec with recorded output"},
        {"container_exec_user_group_cwd", "exec as the sandbox user in its home"},
        {"instance_create_start", "creating and starting an instance in one call"},
        {"operation_wait", "waiting on operations"},
    };
    return extensions;
}

const Json& Api::server() {
    if (!m_server) m_server = m_client.query("GET", "/1.0").metadata;
    return *m_server;
}

void Api::require_extensions() {
    const auto& info = server();
    if (!info.is_object()) return;  // preview
    const auto& present = info.value("api_extensions", Json::array());
    std::string missing;
    for (const auto& ext : required_extensions()) {
        if (std::find(present.begin(), present.end(), ext.name) == present.end()) {
            missing += fmt::format("{}{} (for {})", missing.empty() ? "" : ", ", ext.name, ext.used_for);
        }
    }
    if (!missing.empty()) {
        throw Error(fmt::format("the Incus daemon ({} {}) lacks API extensions agentctl needs: {}",
                                info.value("environment", Json::object()).value("server", "incus"),
                                info.value("environment", Json::object()).value("server_version", "?"), missing),
                    "upgrade Incus to 6.0 LTS or newer (Debian 12: bookworm-backports)");
    }
}

bool Api::supports_vms() {
    const auto& info = server();
    if (!info.is_object()) return true;
    const auto driver = info.value("environment", Json::object()).value("driver", std::string());
    return driver.find("qemu") != std::string::npos;
}

bool Api::clustered() {
    const auto& info = server();
    if (!info.is_object()) return false;
    return info.value("environment", Json::object()).value("server_clustered", false);
}

Json Api::cluster_members() { return m_client.query("GET", "/1.0/cluster/members?recursion=1").metadata; }

std::optional<Json> Api::get_optional(const std::string& path) {
    try {
        auto metadata = m_client.query("GET", path).metadata;
        if (metadata.is_null()) return std::nullopt;  // preview
        return metadata;
    } catch (const NotFound&) {
        return std::nullopt;
    }
}

bool Api::delete_optional(const std::string& path) {
    try {
        auto response = m_client.query("DELETE", path);
        if (response.type == ResponseType::Async) wait(response.operation, 120);
        return true;
    } catch (const NotFound&) {
        return false;
    }
}

void Api::run(std::string_view method, const std::string& path, const Json* body, int timeout_seconds) {
    auto response = m_client.query(method, path, body);
    if (response.type == ResponseType::Async) wait(response.operation, timeout_seconds);
}

Json Api::wait(const std::string& operation, int timeout_seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - std::chrono::steady_clock::now());
        const int slice = static_cast<int>(std::clamp<long>(left.count(), 1, 30));
        auto op = m_client.wait(operation, slice);
        if (!operation_in_progress(op)) return op;
        if (std::chrono::steady_clock::now() >= deadline) {
            throw Error(fmt::format("Incus operation \"{}\" did not finish within {} s",
                                    op.value("description", operation), timeout_seconds),
                        "the daemon may be overloaded; `incus operation list` shows what it is doing");
        }
    }
}

int Api::wait_for_instance_operations(const std::string& name, int timeout_seconds) {
    if (preview()) return 0;
    auto metadata = m_client.query("GET", "/1.0/operations?recursion=1").metadata;
    const auto resource = fmt::format("/1.0/instances/{}", name);
    int waited = 0;
    // {"running": [op, ...], "success": [...], ...}
    for (const auto& op : metadata.value("running", Json::array())) {
        const auto& resources = op.value("resources", Json::object());
        bool ours = false;
        for (const auto& [kind, list] : resources.items()) {
            if (kind != "instances" && kind != "containers") continue;
            // Outside the default project Incus names it "/1.0/instances/NAME?project=P"
            // (the listing itself is already the client's project only).
            for (const auto& r : list) {
                if (!r.is_string()) continue;
                const auto& text = r.get_ref<const std::string&>();
                ours = ours || std::string_view(text).substr(0, text.find('?')) == resource;
            }
        }
        if (!ours || op.value("class", "") == "websocket") continue;
        try {
            wait(op.value("id", ""), timeout_seconds);
        } catch (const Error&) {
            // A failed create or start is exactly what delete cleans up after.
        }
        ++waited;
    }
    return waited;
}

namespace {

std::vector<Instance> instance_list(const Json& metadata) {
    std::vector<Instance> out;
    if (!metadata.is_array()) return out;  // preview
    out.reserve(metadata.size());
    for (const auto& answer : metadata) out.push_back(parse_instance(answer));
    return out;
}

}  // namespace

std::optional<Instance> Api::instance(const std::string& name) {
    // Without recursion: no state, which Incus gathers from inside a running
    // instance (its slowest answer) and instance_state() asks for.
    auto answer = get_optional(fmt::format("/1.0/instances/{}", name));
    if (!answer) return std::nullopt;
    return parse_instance(*answer);
}

std::vector<Instance> Api::instances(bool with_state) {
    return instance_list(
        m_client.query("GET", with_state ? "/1.0/instances?recursion=2" : "/1.0/instances?recursion=1").metadata);
}

std::vector<Instance> Api::instances_where(std::string_view key, std::string_view value) {
    // Incus reads the filter as `FIELD eq VALUE`; a space is %20 in the query.
    return instance_list(
        m_client.query("GET", fmt::format("/1.0/instances?recursion=1&filter=config.{}%20eq%20{}", key, value))
            .metadata);
}

Json Api::networks_in_every_project() {
    auto metadata = m_client.query("GET", "/1.0/networks?all-projects=true&recursion=1").metadata;
    return metadata.is_array() ? metadata : Json::array();
}

std::vector<Instance> Api::instances_in_every_project() {
    return instance_list(m_client.query("GET", "/1.0/instances?all-projects=true&recursion=1").metadata);
}

InstanceState Api::instance_state(const std::string& name) {
    auto metadata = m_client.query("GET", fmt::format("/1.0/instances/{}/state", name)).metadata;
    if (metadata.is_null()) return {};  // preview
    return parse_instance_state(metadata, name);
}

void Api::create_instance(const Json& payload, int timeout_seconds, const std::string& target) {
    run("POST", target.empty() ? std::string("/1.0/instances") : with_target("/1.0/instances", target), &payload,
        timeout_seconds);
}

void Api::change_state(const std::string& name, const Json& payload, int timeout_seconds) {
    run("PUT", fmt::format("/1.0/instances/{}/state", name), &payload, timeout_seconds);
}

void Api::put_instance(const std::string& name, const Instance& instance, int timeout_seconds) {
    const auto body = instance_put_body(instance);
    run("PUT", fmt::format("/1.0/instances/{}", name), &body, timeout_seconds);
}

void Api::patch_instance_config(const std::string& name, const Json& config) {
    Json body{{"config", config}};
    run("PATCH", fmt::format("/1.0/instances/{}", name), &body, 60);
}

bool Api::delete_instance(const std::string& name) { return delete_optional(fmt::format("/1.0/instances/{}", name)); }

ExecResult Api::exec(const std::string& name, const Json& payload, int timeout_seconds) {
    auto response = m_client.query("POST", fmt::format("/1.0/instances/{}/exec", name), &payload);
    ExecResult result;
    if (preview()) return result;
    auto op = wait(response.operation, timeout_seconds);
    const auto& metadata = op.value("metadata", Json::object());
    result.exit_code = metadata.value("return", -1);
    const auto output = metadata.value("output", Json::object());
    auto fetch = [&](const char* fd, std::string& into) {
        if (!output.contains(fd) || !output[fd].is_string()) return;
        const auto path = output[fd].get<std::string>();
        into = m_client.get_raw(path);
        try {
            m_client.query("DELETE", path);
        } catch (const std::exception&) {
            // The log is only clutter; never fail a command over it.
        }
    };
    fetch("1", result.out);
    fetch("2", result.err);
    return result;
}

namespace {

// A file path as a query value (RFC 3986 unreserved characters and '/' kept).
std::string query_escape(std::string_view text) {
    std::string out;
    for (unsigned char c : text) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
            out += static_cast<char>(c);
        } else {
            out += fmt::format("%{:02X}", c);
        }
    }
    return out;
}

}  // namespace

void Api::push_file(const std::string& name, const std::string& path, std::string_view data) {
    m_client.post_raw(fmt::format("/1.0/instances/{}/files?path={}", name, query_escape(path)), data,
                      "application/octet-stream");
}

std::string Api::pull_file(const std::string& name, const std::string& path) {
    return m_client.get_raw(fmt::format("/1.0/instances/{}/files?path={}", name, query_escape(path)));
}

std::optional<Json> Api::network(const std::string& name) {
    return get_optional(fmt::format("/1.0/networks/{}", name));
}

Json Api::networks() {
    auto metadata = m_client.query("GET", "/1.0/networks?recursion=1").metadata;
    return metadata.is_array() ? metadata : Json::array();
}

void Api::create_network(const Json& payload, const std::string& target) {
    const auto path = target.empty() ? std::string("/1.0/networks") : with_target("/1.0/networks", target);
    retry_transient([&] { run("POST", path, &payload, 120); }, k_network_retry_budget);
}

void Api::patch_network_config(const std::string& name, const Json& config) {
    Json body{{"config", config}};
    retry_transient([&] { run("PATCH", fmt::format("/1.0/networks/{}", name), &body, 120); }, k_network_retry_budget);
}

bool Api::delete_network(const std::string& name) {
    bool found = false;
    retry_transient([&] { found = delete_optional(fmt::format("/1.0/networks/{}", name)); }, k_network_retry_budget);
    return found;
}

std::optional<Json> Api::acl(const std::string& name) {
    return get_optional(fmt::format("/1.0/network-acls/{}", name));
}

Json Api::acls() {
    auto metadata = m_client.query("GET", "/1.0/network-acls?recursion=1").metadata;
    return metadata.is_array() ? metadata : Json::array();
}

void Api::create_acl(const Json& payload) { run("POST", "/1.0/network-acls", &payload, 60); }

void Api::put_acl(const std::string& name, const Json& payload) {
    Json body = payload;
    body.erase("name");
    run("PUT", fmt::format("/1.0/network-acls/{}", name), &body, 60);
}

bool Api::delete_acl(const std::string& name) {
    bool found = false;
    retry_transient([&] { found = delete_optional(fmt::format("/1.0/network-acls/{}", name)); },
                    k_network_retry_budget);
    return found;
}

void Api::create_snapshot(const std::string& name, const std::string& snapshot) {
    Json body{{"name", snapshot}, {"stateful", false}};
    run("POST", fmt::format("/1.0/instances/{}/snapshots", name), &body, 600);
}

std::vector<InstanceSnapshot> Api::snapshots(const std::string& name) {
    auto metadata = m_client.query("GET", fmt::format("/1.0/instances/{}/snapshots?recursion=1", name)).metadata;
    std::vector<InstanceSnapshot> out;
    if (!metadata.is_array()) return out;  // preview
    for (const auto& answer : metadata) out.push_back(parse_instance_snapshot(answer, name));
    return out;
}

void Api::restore_snapshot(const std::string& name, const std::string& snapshot) {
    Json body{{"restore", snapshot}};
    run("PUT", fmt::format("/1.0/instances/{}", name), &body, 600);
}

void Api::delete_snapshot(const std::string& name, const std::string& snapshot) {
    run("DELETE", fmt::format("/1.0/instances/{}/snapshots/{}", name, snapshot), nullptr, 600);
}

void Api::create_image(const Json& payload, int timeout_seconds) {
    run("POST", "/1.0/images", &payload, timeout_seconds);
}

void Api::patch_image(const std::string& fingerprint, const Json& payload) {
    run("PATCH", fmt::format("/1.0/images/{}", fingerprint), &payload, 60);
}

void Api::delete_image(const std::string& fingerprint) {
    run("DELETE", fmt::format("/1.0/images/{}", fingerprint), nullptr, 120);
}

std::optional<Json> Api::image_alias(const std::string& name) {
    return get_optional(fmt::format("/1.0/images/aliases/{}", name));
}

std::optional<Json> Api::image(const std::string& reference) {
    auto fingerprint = reference;
    if (auto alias = image_alias(reference)) fingerprint = alias->value("target", reference);
    return get_optional(fmt::format("/1.0/images/{}", fingerprint));
}

std::optional<Json> Api::project(const std::string& name) {
    return get_optional(fmt::format("/1.0/projects/{}", name));
}

}  // namespace agentctl::provider::incus
