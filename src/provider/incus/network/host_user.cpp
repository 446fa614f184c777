#include "provider/incus/network/host_user.hpp"

#include <grp.h>
#include <pwd.h>

#include <charconv>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/lifecycle/naming.hpp"

namespace agentctl::provider::incus {

std::map<std::string, std::string> host_record_config(const HostRecord& record) {
    return {{std::string(key::k_host_uid), std::to_string(record.uid)},
            {std::string(key::k_host_state), record.state_dir}};
}

HostRecord parse_host_record(const Json& config) {
    HostRecord record;
    const auto uid = config.value(std::string(key::k_host_uid), std::string());
    const auto dir = config.value(std::string(key::k_host_state), std::string());
    if (uid.empty() && dir.empty()) return record;
    unsigned long value = 0;
    auto [end, ec] = std::from_chars(uid.data(), uid.data() + uid.size(), value);
    if (uid.empty() || ec != std::errc() || end != uid.data() + uid.size() || value < k_host_id_first ||
        value >= k_host_id_first + k_host_id_count) {
        throw Error(fmt::format("{} is \"{}\", not an id of agentctl's range {}-{}", key::k_host_uid, uid,
                                k_host_id_first, k_host_id_first + k_host_id_count - 1),
                    "agentctl writes this key when it creates the sandbox; recreate the sandbox");
    }
    if (dir.empty() || dir.front() != '/') {
        throw Error(fmt::format("{} is \"{}\", not an absolute directory", key::k_host_state, dir),
                    "agentctl writes this key when it creates the sandbox; recreate the sandbox");
    }
    record.uid = static_cast<uid_t>(value);
    record.state_dir = dir;
    return record;
}

uid_t pick_host_id(const Json& networks, const std::function<bool(uid_t)>& known_on_host) {
    std::set<uid_t> used;
    for (const auto& network : networks) {
        const auto& config = network.value("config", Json::object());
        try {
            if (auto record = parse_host_record(config); record.recorded()) used.insert(record.uid);
        } catch (const Error&) {
            // Not a record agentctl wrote: it claims nothing.
        }
    }
    for (uid_t id = k_host_id_first; id < k_host_id_first + k_host_id_count; ++id) {
        if (!used.contains(id) && !known_on_host(id)) return id;
    }
    throw Error(fmt::format("every id of agentctl's range {}-{} is taken by a sandbox's host processes",
                            k_host_id_first, k_host_id_first + k_host_id_count - 1),
                "delete sandboxes you no longer need");
}

bool id_known_on_host(uid_t id) { return ::getpwuid(id) != nullptr || ::getgrgid(id) != nullptr; }

std::string host_network_lock_path(const std::string& lock_dir) { return lock_dir + "/agentctl-incus-network.lock"; }

std::string host_firewall_lock_path(const std::string& lock_dir) { return lock_dir + "/agentctl-incus-firewall.lock"; }

std::string host_sandbox_lock_path(const std::string& lock_dir, const std::string& sandbox) {
    return fmt::format("{}/agentctl-incus-sandbox-{}.lock", lock_dir, sandbox);
}

std::string host_pool_lock_path(const std::string& lock_dir, const std::string& project) {
    return fmt::format("{}/agentctl-incus-pool-{}.lock", lock_dir, project.empty() ? "default" : project);
}

std::string default_state_dir(const ProviderContext& context, const std::string& sandbox) {
    namespace fs = std::filesystem;
    const fs::path base =
        context.state_dir.empty() ? fs::temp_directory_path() / "agentctl" : fs::path(context.state_dir);
    return (base / "incus" / sandbox).string();
}

std::string state_dir_of(const ProviderContext& context, const HostRecord& record, const std::string& sandbox) {
    return record.recorded() ? record.state_dir : default_state_dir(context, sandbox);
}

std::string host_uid_set() {
    return fmt::format("{{ {}, {}-{} }}", k_shared_host_id, k_host_id_first, k_host_id_first + k_host_id_count - 1);
}

}  // namespace agentctl::provider::incus
