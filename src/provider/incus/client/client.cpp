// The Client layer: envelope parsing, Incus errors with hints, operation waits,
// and the preview client that prints `incus query` lines instead of sending.
#include "provider/incus/client/client.hpp"

#include <map>
#include <ostream>
#include <set>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"

namespace agentctl::provider::incus {
namespace {

bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

// What Incus says when GET /1.0/operations/ID/wait?timeout=N outlasts N.
constexpr std::string_view k_wait_timed_out = "context deadline exceeded";

std::string with_project(std::string_view path, std::string_view project) {
    std::string target(path);
    // Incus refuses a project next to all-projects.
    if (!project.empty() && !contains(path, "all-projects=true")) {
        target += (target.find('?') == std::string::npos ? '?' : '&');
        target += "project=";
        target += project;
    }
    return target;
}

std::string operation_id(std::string_view operation) {
    auto slash = operation.rfind('/');
    return std::string(slash == std::string_view::npos ? operation : operation.substr(slash + 1));
}

class RealClient final : public Client {
public:
    RealClient(std::unique_ptr<Transport> transport, std::string project)
        : m_transport(std::move(transport)), m_project(std::move(project)) {}

    Response query(std::string_view method, std::string_view path, const Json* body) override {
        const std::string payload = body == nullptr ? std::string() : body->dump();
        auto raw = m_transport->send(method, with_project(path, m_project), payload, "application/json");
        auto response = parse_envelope(raw.body, raw.status);
        if (response.type == ResponseType::Error) {
            const int code = response.error_code != 0 ? response.error_code : raw.status;
            auto message = fmt::format("Incus refused {} {}: {}", method, path, response.error);
            if (code == 404) throw NotFound(message, hint_for_incus_error(response.error, code));
            throw IncusError(message, hint_for_incus_error(response.error, code), code,
                             classify_refusal(response.error));
        }
        return response;
    }

    Json wait(std::string_view operation, int timeout_seconds) override {
        const auto path = fmt::format("/1.0/operations/{}/wait?timeout={}", operation_id(operation), timeout_seconds);
        Json op;
        try {
            op = query("GET", path, nullptr).metadata;
        } catch (const IncusError& e) {
            // Incus 6.0 answers a wait that outlasts its timeout with this
            // error, not with the operation: it is still running.
            if (!contains(e.what(), k_wait_timed_out)) throw;
            return Json{{"id", operation_id(operation)}, {"status", "Running"}};
        }
        if (incus_status(op) == IncusStatus::Success || operation_in_progress(op)) return op;
        const auto status = op.value("status", std::string());
        const auto err = op.value("err", std::string());
        const int code = op.value("status_code", 0);
        throw IncusError(fmt::format("Incus operation \"{}\" failed: {}", op.value("description", std::string("?")),
                                     err.empty() ? status : err),
                         hint_for_incus_error(err, code), code, classify_refusal(err));
    }

    std::string get_raw(std::string_view path) override {
        auto raw = m_transport->send("GET", with_project(path, m_project), {}, {});
        if (raw.status == 404) throw NotFound(fmt::format("Incus has no {}", path));
        if (raw.status >= 400) {
            std::string text = raw.body;
            try {
                text = parse_envelope(raw.body, raw.status).error;
            } catch (const Error&) {
            }
            throw IncusError(fmt::format("Incus refused GET {}: {}", path, text),
                             hint_for_incus_error(text, raw.status), raw.status, classify_refusal(text));
        }
        return std::move(raw.body);
    }

    void post_raw(std::string_view path, std::string_view data, std::string_view content_type) override {
        auto raw = m_transport->send("POST", with_project(path, m_project), data, content_type);
        if (raw.status < 400) return;
        std::string text = raw.body;
        try {
            text = parse_envelope(raw.body, raw.status).error;
        } catch (const Error&) {
        }
        throw IncusError(fmt::format("Incus refused POST {}: {}", path, text), hint_for_incus_error(text, raw.status),
                         raw.status, classify_refusal(text));
    }

    [[nodiscard]] bool preview() const override { return false; }
    [[nodiscard]] Transport* transport() override { return m_transport.get(); }

private:
    std::unique_ptr<Transport> m_transport;
    std::string m_project;
};

class PreviewClient final : public Client {
public:
    PreviewClient(std::ostream& out, std::string project, std::unique_ptr<Client> reader, std::string remote)
        : m_out(out), m_project(std::move(project)), m_reader(std::move(reader)), m_remote(std::move(remote)) {}

    Response query(std::string_view method, std::string_view path, const Json* body) override {
        m_out << shell_join(query_argv(method, path, body, m_project, m_remote)) << '\n';
        Response response;
        if (method == "GET") {
            response.status_code = 200;
            response.metadata = read(path);
        } else {
            simulate(method, path, body);
            // `incus query` waits for operations itself: nothing more is printed.
            response.type = ResponseType::Async;
            response.status_code = 100;
            response.operation = "/1.0/operations/preview";
        }
        return response;
    }

    Json wait(std::string_view, int) override { return Json::object(); }

    std::string get_raw(std::string_view path) override {
        m_out << shell_join(query_argv("GET", path, nullptr, m_project, m_remote)) << '\n';
        return {};
    }

    void post_raw(std::string_view path, std::string_view data, std::string_view content_type) override {
        m_out << shell_join(query_argv("POST", path, nullptr, m_project))
              << fmt::format("  # {} bytes of {}", data.size(), content_type) << '\n';
    }

    [[nodiscard]] bool preview() const override { return true; }

private:
    // "/1.0/instances/NAME" for an instance path (with or without a query), else empty.
    static std::string instance_path(std::string_view path) {
        constexpr std::string_view prefix = "/1.0/instances/";
        path = path.substr(0, path.find('?'));
        if (!path.starts_with(prefix) || path.size() == prefix.size()) return {};
        auto slash = path.find('/', prefix.size());
        return std::string(path.substr(0, slash));
    }

    // What a preview may ask the daemon: the sandbox's instance (and the list
    // of instances, which gc reads), bridges and ACLs, and what the real command checks before it makes anything (the
    // server's drivers and cluster, the images), so that a preview is refused
    // where the real command would be.
    static bool readable(std::string_view path) {
        const auto bare = path.substr(0, path.find('?'));
        if (bare == "/1.0" || bare == "/1.0/cluster/members" || bare == "/1.0/instances") return true;
        for (std::string_view prefix : {"/1.0/instances/", "/1.0/networks", "/1.0/network-acls", "/1.0/images/"}) {
            if (path.starts_with(prefix)) return true;
        }
        return false;
    }

    // A read: what the printed writes made, else the daemon's answer.
    Json read(std::string_view path) {
        const auto instance = instance_path(path);
        const bool whole = !instance.empty() && path.substr(0, path.find('?')) == instance;
        if (whole) {
            if (m_deleted.contains(instance)) throw NotFound(fmt::format("Incus has no {}", instance));
            if (auto it = m_instances.find(instance); it != m_instances.end()) return it->second;
        }
        if (!readable(path) || m_reader == nullptr) return nullptr;
        try {
            return m_reader->query("GET", path, nullptr).metadata;
        } catch (const NotFound&) {
            throw;
        } catch (const Error&) {
            m_reader.reset();  // no daemon to ask: the preview goes on with what it knows
            return nullptr;
        }
    }

    // The instance as the real run would have it before this write, or null.
    Json* known(const std::string& instance) {
        if (auto it = m_instances.find(instance); it != m_instances.end()) return &it->second;
        if (m_deleted.contains(instance)) return nullptr;
        Json current;
        try {
            current = read(instance + "?recursion=1");
        } catch (const NotFound&) {
            return nullptr;
        }
        if (!current.is_object()) return nullptr;
        return &(m_instances[instance] = std::move(current));
    }

    void simulate(std::string_view method, std::string_view path, const Json* body) {
        const auto bare = path.substr(0, path.find('?'));
        if (method == "POST" && bare == "/1.0/instances" && body != nullptr && body->contains("name")) {
            const auto instance = "/1.0/instances/" + body->value("name", "");
            Json created = *body;
            created["status"] = body->value("start", false) ? "Running" : "Stopped";
            m_deleted.erase(instance);
            m_instances[instance] = std::move(created);
            return;
        }
        const auto instance = instance_path(path);
        if (instance.empty()) return;
        if (method == "DELETE" && bare == instance) {
            m_instances.erase(instance);
            m_deleted.insert(instance);
            return;
        }
        Json* current = body == nullptr ? nullptr : known(instance);
        if (current == nullptr && method == "PUT" && bare == instance) {
            // A whole instance put over one the daemon does not have (a preview of a
            // sandbox that does not exist): the body is all there is to know.
            // (Incus's defaults for what the body does not carry: a stopped container.)
            current = &(m_instances[instance] = Json{{"name", instance.substr(instance.rfind('/') + 1)},
                                                     {"type", "container"},
                                                     {"status", "Stopped"}});
        }
        if (current == nullptr) return;
        if (method == "PATCH" && bare == instance && body->contains("config")) {
            for (const auto& [key, value] : (*body)["config"].items()) (*current)["config"][key] = value;
        } else if (method == "PUT" && bare == instance && !body->contains("restore")) {
            for (const auto& [key, value] : body->items()) (*current)[key] = value;
        } else if (method == "PUT" && bare == instance + "/state") {
            const auto action = body->value("action", "");
            if (action == "start" || action == "restart") (*current)["status"] = "Running";
            if (action == "stop") (*current)["status"] = "Stopped";
        }
    }

    std::ostream& m_out;
    std::string m_project;
    std::unique_ptr<Client> m_reader;
    std::string m_remote;
    std::map<std::string, Json> m_instances;  // as the printed writes leave them
    std::set<std::string> m_deleted;
};

}  // namespace

Response parse_envelope(std::string_view body, int http_status) {
    Json document = Json::parse(body, nullptr, false);
    if (document.is_discarded() || !document.is_object() || !document.contains("type")) {
        throw Error(fmt::format("the Incus daemon sent an answer that is not an API envelope (HTTP {}): {}",
                                http_status, std::string(body.substr(0, 200))),
                    "is the socket really an Incus daemon? Check $INCUS_SOCKET");
    }
    Response response;
    const auto type = document.value("type", std::string());
    if (type == "sync") {
        response.type = ResponseType::Sync;
    } else if (type == "async") {
        response.type = ResponseType::Async;
    } else if (type == "error") {
        response.type = ResponseType::Error;
    } else {
        throw Error(fmt::format("the Incus daemon sent an envelope of unknown type \"{}\"", type));
    }
    response.status_code = document.value("status_code", 0);
    response.error_code = document.value("error_code", 0);
    response.error = document.value("error", std::string());
    response.operation = document.value("operation", std::string());
    if (auto it = document.find("metadata"); it != document.end()) response.metadata = std::move(*it);
    return response;
}

std::string config_text(const Json& object, std::string_view key) {
    const auto config = object.find("config");
    if (config == object.end() || !config->is_object()) return {};
    auto it = config->find(std::string(key));
    return it != config->end() && it->is_string() ? it->get<std::string>() : std::string();
}

IncusStatus incus_status_named(std::string_view name) {
    static const std::map<std::string, IncusStatus, std::less<>> names{
        {"Running", IncusStatus::Running},     {"Pending", IncusStatus::Pending}, {"Stopped", IncusStatus::Stopped},
        {"Frozen", IncusStatus::Frozen},       {"Success", IncusStatus::Success}, {"Failure", IncusStatus::Failure},
        {"Cancelled", IncusStatus::Cancelled},
    };
    const auto found = names.find(name);
    return found == names.end() ? IncusStatus::Other : found->second;
}

IncusStatus incus_status(const Json& object) {
    const auto* status = object.is_object() && object.contains("status") ? &object["status"] : nullptr;
    if (status == nullptr || !status->is_string()) return IncusStatus::Other;
    return incus_status_named(status->get_ref<const std::string&>());
}

IncusRefusal classify_refusal(std::string_view incus_error) {
    if (contains(incus_error, "bridge children interfaces") && contains(incus_error, "does not exist"))
        return IncusRefusal::InterfaceGone;
    if (contains(incus_error, "is busy")) return IncusRefusal::Busy;
    if (contains(incus_error, "in use")) return IncusRefusal::InUse;
    if (contains(incus_error, "Instance is running")) return IncusRefusal::Running;
    return IncusRefusal::Other;
}

std::string hint_for_incus_error(std::string_view error, int code) {
    if (contains(error, "vhost_vsock") || contains(error, "KVM") || contains(error, "virtual-machine") ||
        contains(error, "QEMU")) {
        return "this host cannot run Incus virtual machines; use a container instead: "
               "--isolation container (or spec.isolation: container in a profile), which is a weaker boundary";
    }
    if (contains(error, "Failed to receive fd from listener") || contains(error, "address already in use")) {
        return "a published host port is already in use; pick another --port host:guest";
    }
    if (contains(error, "already exists")) {
        return "pick another name, or delete the old one first (agentctl delete NAME)";
    }
    if (contains(error, "Image not found") || contains(error, "Failed to find image") ||
        contains(error, "image not found")) {
        return "list the local images with `incus image list`; fetch one with `agentctl image pull REF`";
    }
    if (contains(error, "is running") || contains(error, "must be stopped")) {
        return "stop it first (agentctl stop NAME) or pass --force";
    }
    if (code == 403 || contains(error, "not authorized") || contains(error, "Forbidden")) {
        return "your user may not do this in Incus: join the incus-admin group or run as root";
    }
    if (code == 404) {
        return "`agentctl list` shows the sandboxes that exist";
    }
    return {};
}

std::vector<std::string> query_argv(std::string_view method, std::string_view path, const Json* body,
                                    std::string_view project, std::string_view remote) {
    // `incus query` refuses --project (and ignores $INCUS_PROJECT): the
    // project goes in the path, as the real request carries it.
    const auto target = with_project(path, project);
    std::vector<std::string> argv{"incus", "query"};
    argv.emplace_back("-X");
    argv.emplace_back(method);
    if (body != nullptr) {
        argv.emplace_back("--data");
        argv.emplace_back(body->dump());
    }
    argv.emplace_back(remote.empty() ? target : fmt::format("{}:{}", remote, target));
    return argv;
}

std::unique_ptr<Client> make_client(std::unique_ptr<Transport> transport, std::string project) {
    return std::make_unique<RealClient>(std::move(transport), std::move(project));
}

std::unique_ptr<Client> make_preview_client(std::ostream& out, std::string project, std::unique_ptr<Client> reader,
                                            std::string remote) {
    return std::make_unique<PreviewClient>(out, std::move(project), std::move(reader), std::move(remote));
}

}  // namespace agentctl::provider::incus
