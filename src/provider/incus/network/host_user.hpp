// Who a sandbox's host processes run as, and where their files are: each
// Incus sandbox on this machine has a uid and gid of its own (the same
// number) for its egress proxy and its resolver, so that one sandbox's
// processes cannot read another's policy or log, trace or signal its proxy,
// or take its place.
//
// The ids come from a range agentctl owns: k_host_id_first and the
// k_host_id_count numbers after it (2000000000-2000065535). It lies in the
// part of the 32-bit id space that nothing allocates: above the system
// (0-999), normal (1000-60000) and dynamic (61184-65519) users and nobody
// (65534), above the ranges /etc/subuid gives root for containers (Incus's
// isolated idmaps start at 1065536; root's range on a default install is
// 1000000-1000999999), outside systemd's container range (524288-1879048191),
// and below 2^31 (ids some tools read as signed). An id that has a passwd or
// group entry on this machine is never handed out.
//
// The record (HostRecord) is written on the sandbox's bridge when it is made
// (bridges live in Incus's default project, shared by every project, so the
// bridges list is the host's allocation table; deleting the bridge releases
// the id) and on its instance; the allocation runs under the host's network
// lock (host_network_lock_path).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agentctl/provider.hpp"
#include "provider/incus/client/api.hpp"

namespace agentctl::provider::incus {

inline constexpr uid_t k_host_id_first = 2'000'000'000;
inline constexpr uid_t k_host_id_count = 65'536;
// What sandboxes made before they had ids of their own run as.
inline constexpr uid_t k_shared_host_id = 65534;

struct HostRecord {
    uid_t uid = k_shared_host_id;  // also the gid
    std::string state_dir;         // absolute: the directory of the host processes' files
    [[nodiscard]] bool recorded() const { return !state_dir.empty(); }
};

// The instance or bridge config keys that hold `record`.
[[nodiscard]] std::map<std::string, std::string> host_record_config(const HostRecord& record);
// The record in an instance's or bridge's config; not recorded() when it has
// none (a sandbox made before). Throws agentctl::Error naming the key when a
// value is not one agentctl writes.
[[nodiscard]] HostRecord parse_host_record(const Json& config);

// The lowest id of the range that no bridge in `networks` records and that
// `known_on_host` (a passwd or group entry) does not claim. Throws
// agentctl::Error when every id is taken.
[[nodiscard]] uid_t pick_host_id(const Json& networks, const std::function<bool(uid_t)>& known_on_host);
// The host's passwd and group databases.
[[nodiscard]] bool id_known_on_host(uid_t id);

// The host's network lock (one per host, whatever the user's state or
// runtime directory): every agentctl on this machine holds it while it
// chooses a bridge's subnet and host ids and while it sets up, changes or
// deletes a bridge. Incus lists every host interface in each of those steps
// and fails when one goes away meanwhile (IncusRefusal::InterfaceGone), which
// another agentctl deleting a bridge at that moment would cause.
[[nodiscard]] std::string host_network_lock_path(const std::string& lock_dir);
// The host's firewall lock (one per host): every agentctl holds it while its
// nft changes a firewall table. Changes made at once make each nft start its
// work over whenever another one commits; one at a time, 16 creates at once
// take each a few seconds instead of up to a quarter of a minute.
[[nodiscard]] std::string host_firewall_lock_path(const std::string& lock_dir);
// The host's lock of sandbox NAME (one per host, whatever the user's state
// or runtime directory): create and delete hold it from start to end, and gc
// leaves alone every sandbox whose lock another agentctl holds.
[[nodiscard]] std::string host_sandbox_lock_path(const std::string& lock_dir, const std::string& sandbox);
// The lock of the warm pool of `project` ("" = default) on this host: held by
// whoever fills or drains it (provider_pool.cpp).
[[nodiscard]] std::string host_pool_lock_path(const std::string& lock_dir, const std::string& project);

// The directory of sandbox NAME's host files: STATE_DIR/incus/NAME.
[[nodiscard]] std::string default_state_dir(const ProviderContext& context, const std::string& sandbox);
// Where sandbox NAME's host files are: where `record` says (whatever this
// agentctl's state directory is), else default_state_dir.
[[nodiscard]] std::string state_dir_of(const ProviderContext& context, const HostRecord& record,
                                       const std::string& sandbox);

// The nft set of every uid a sandbox's host process may run as (the firewall
// refuses their new connections into any sandbox bridge).
[[nodiscard]] std::string host_uid_set();

}  // namespace agentctl::provider::incus
