// Typed helpers over the Client: one function per Incus API call agentctl
// makes. They build the path and body, wait on operations, and turn the
// answers into the shapes the provider needs. With the preview client every
// GET answers "nothing there" and every change succeeds without effect.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "provider/incus/client/client.hpp"
#include "provider/incus/client/instance.hpp"

namespace agentctl::provider::incus {

struct ExecResult {
    int exit_code = 0;
    std::string out;
    std::string err;
};

// The Incus API extensions agentctl depends on, with the feature each enables.
struct RequiredExtension {
    std::string_view name;
    std::string_view used_for;
};
[[nodiscard]] const std::vector<RequiredExtension>& required_extensions();

// Runs `call`, and again while it fails with a transient IncusError
// (IncusError::transient: Incus refused for a moment, nothing was changed),
// after a pause that grows from 100 ms to 2 s with a random part (so that
// processes that collided once do not collide again in step), until `budget`
// has passed; then that error is thrown, like any other error at once.
void retry_transient(const std::function<void()>& call, std::chrono::milliseconds budget);

class Api {
public:
    explicit Api(Client& client) : m_client(client) {}

    [[nodiscard]] Client& client() { return m_client; }
    [[nodiscard]] bool preview() const { return m_client.preview(); }

    // GET /1.0 (cached). Null in preview.
    const Json& server();
    // Throws agentctl::Error naming every missing extension and what needs it.
    void require_extensions();
    // Whether the daemon can run virtual machines (environment.driver lists qemu).
    // True in preview.
    bool supports_vms();
    // Whether the daemon is a cluster member (environment.server_clustered). False in preview.
    bool clustered();
    // GET /1.0/cluster/members?recursion=1 (null in preview).
    Json cluster_members();

    // The instance calls answer typed values (instance.hpp); a malformed
    // answer throws agentctl::Error naming the instance and the field.
    // GET /1.0/instances/NAME (config, devices, status; no state: instance_state()); nullopt when absent.
    std::optional<Instance> instance(const std::string& name);
    // GET /1.0/instances?recursion=1: every instance (config, devices, status),
    // without its state; `with_state`: recursion=2, every instance with its
    // state, which Incus gathers from each running instance (milliseconds each).
    std::vector<Instance> instances(bool with_state);
    // GET /1.0/instances?recursion=1&filter=config.KEY eq VALUE: the instances
    // whose config has `key` set to `value` (a name: letters, digits, '-').
    std::vector<Instance> instances_where(std::string_view key, std::string_view value);
    // GET /1.0/instances?all-projects=true&recursion=1: every instance of
    // every project (each with its project), without state.
    std::vector<Instance> instances_in_every_project();
    // GET /1.0/networks?all-projects=true&recursion=1: every network of every
    // project, and the host interfaces Incus lists beside them ("managed": false).
    Json networks_in_every_project();
    // GET /1.0/instances/NAME/state (in preview: a state with nothing in it).
    InstanceState instance_state(const std::string& name);
    // POST /1.0/instances, waited on; with `target`, on that cluster member (?target=).
    void create_instance(const Json& payload, int timeout_seconds, const std::string& target = {});
    // PUT /1.0/instances/NAME/state, waited on.
    void change_state(const std::string& name, const Json& payload, int timeout_seconds);
    // PUT /1.0/instances/NAME with the writable fields of `instance`, waited on.
    void put_instance(const std::string& name, const Instance& instance, int timeout_seconds);
    // PATCH /1.0/instances/NAME {config: {...}} (keys merged; "" removes one).
    void patch_instance_config(const std::string& name, const Json& config);
    // DELETE /1.0/instances/NAME; false when it did not exist.
    bool delete_instance(const std::string& name);

    // POST /1.0/instances/NAME/exec (recorded output), waits, fetches and then
    // deletes the output logs. In preview: exit code 0, no output.
    ExecResult exec(const std::string& name, const Json& payload, int timeout_seconds);

    // POST /1.0/instances/NAME/files?path=PATH (Content-Type
    // application/octet-stream; without it Incus writes an empty file). A new
    // file is root's, mode 0644.
    void push_file(const std::string& name, const std::string& path, std::string_view data);
    // GET of the same: the file's bytes. Throws NotFound when it is absent.
    std::string pull_file(const std::string& name, const std::string& path);

    std::optional<Json> network(const std::string& name);
    Json networks();  // recursion=1
    // POST /1.0/networks; with `target`, only defines it pending on that
    // cluster member (see cluster.hpp, pending_network_payload). The changes
    // of a network and the deletes of networks and ACLs are asked again while
    // Incus refuses for a moment (retry_transient).
    void create_network(const Json& payload, const std::string& target = {});
    void patch_network_config(const std::string& name, const Json& config);
    bool delete_network(const std::string& name);

    std::optional<Json> acl(const std::string& name);
    Json acls();  // recursion=1
    void create_acl(const Json& payload);
    void put_acl(const std::string& name, const Json& payload);  // `name` dropped from the body
    bool delete_acl(const std::string& name);

    void create_snapshot(const std::string& name, const std::string& snapshot);
    std::vector<InstanceSnapshot> snapshots(const std::string& name);  // recursion=1
    void restore_snapshot(const std::string& name, const std::string& snapshot);
    void delete_snapshot(const std::string& name, const std::string& snapshot);

    void create_image(const Json& payload, int timeout_seconds);
    void patch_image(const std::string& fingerprint, const Json& payload);
    void delete_image(const std::string& fingerprint);
    // GET /1.0/images/aliases/NAME; nullopt when absent (and in preview).
    std::optional<Json> image_alias(const std::string& name);
    // GET /1.0/images/FINGERPRINT of an alias or fingerprint; nullopt when absent (and in preview).
    std::optional<Json> image(const std::string& reference);
    std::optional<Json> project(const std::string& name);

    // Waits (bounded) for every running operation on instance `name`, e.g. the
    // create or start of an agentctl process that was killed. Returns how many.
    int wait_for_instance_operations(const std::string& name, int timeout_seconds);

    // Waits for an operation in slices until it is done or `timeout_seconds` passed.
    Json wait(const std::string& operation, int timeout_seconds);

private:
    void run(std::string_view method, const std::string& path, const Json* body, int timeout_seconds);
    std::optional<Json> get_optional(const std::string& path);
    bool delete_optional(const std::string& path);

    Client& m_client;
    std::optional<Json> m_server;
};

}  // namespace agentctl::provider::incus
