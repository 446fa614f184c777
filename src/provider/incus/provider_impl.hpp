// The Incus provider class, shared by the provider_*.cpp files (one per group
// of verbs). Only the factory in incus_provider.hpp is public.
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <sys/types.h>
#include <string>

#include "agentctl/provider.hpp"
#include "provider/incus/acl_rules.hpp"
#include "provider/incus/api.hpp"
#include "provider/incus/egress_host.hpp"
#include "provider/incus/payloads.hpp"

namespace agentctl::provider::incus {

// Timeouts (seconds) of the long steps.
inline constexpr int k_create_timeout = 600;
inline constexpr int k_boot_timeout_container = 60;
inline constexpr int k_boot_timeout_vm = 300;
inline constexpr int k_install_timeout = 1800;

// provider_create.cpp: the owners of the writable mounts (stat of each
// canonical path), and the check that /etc/subuid and /etc/subgid let root map
// the owner (newuidmap refuses otherwise). Both throw agentctl::Error.
[[nodiscard]] std::vector<MountOwner> writable_mount_owners(const std::vector<Mount>& mounts);
void check_subordinate_ids(const IdentityMap& map);

class IncusProvider final : public Provider {
public:
    // `egress`: the host placement of the sandboxes' proxies; `egress_instance`:
    // the companion-instance placement (egress_host.hpp).
    IncusProvider(ProviderContext& context, std::unique_ptr<Client> client, std::unique_ptr<EgressHost> egress,
                  std::unique_ptr<EgressHost> egress_instance, std::string project);

    [[nodiscard]] std::string_view name() const override { return "incus"; }
    [[nodiscard]] std::string backend_version() override;

    void create(const SandboxSpec& spec) override;
    void start(const std::string& name, const StartRequest& request) override;
    void stop(const std::string& name, const StopRequest& request) override;
    void remove(const std::string& name, bool force) override;
    [[nodiscard]] std::vector<InstanceInfo> list() override;
    [[nodiscard]] InstanceInfo status(const std::string& name) override;
    int exec(const std::string& name, const ExecRequest& request) override;
    int shell(const std::string& name, bool root) override;
    void view(const std::string& name, bool read_only) override;
    int logs(const std::string& name, const LogRequest& request) override;
    void snapshot_create(const std::string& name, const std::string& snapshot) override;
    [[nodiscard]] std::vector<SnapshotInfo> snapshot_list(const std::string& name) override;
    void snapshot_restore(const std::string& name, const std::string& snapshot) override;
    void snapshot_delete(const std::string& name, const std::string& snapshot) override;
    void image_pull(const std::string& ref) override;
    void image_build(const std::string& output, const std::string& base,
                     const std::vector<std::string>& packages) override;
    void apply_network_policy(const std::string& name, const policy::NetworkPolicy& network) override;

private:
    // provider_images.cpp
    void build_from_nothing(const std::string& output, const std::vector<std::string>& packages);

    // provider_create.cpp
    std::string image_for(const SandboxSpec& spec);
    void create_pieces(const SandboxSpec& spec);
    Ipv4Net choose_subnet();
    // The ACL for `network` on the bridge of `subnet` (its host address), with
    // the proxy where `placement` puts it. Reports the notes when `report`.
    AclRules plan_acl(const std::string& sandbox, const policy::NetworkPolicy& network, const Ipv4Net& subnet,
                      ProxyPlacement placement, bool report = true);
    // incus.proxyPlacement for a new sandbox (choose_proxy_placement).
    ProxyPlacement placement_setting() const;
    // Where a sandbox's proxy runs (its record), that placement's egress host,
    // and the site its proxy serves.
    static ProxyPlacement placement_of(const Json& instance);
    EgressHost& egress(ProxyPlacement placement) const;
    static EgressSite site_of(const std::string& name, const Json& instance);
    // The firewall table of a sandbox's bridge for `rules`.
    FirewallSpec firewall_spec(const std::string& bridge, const Ipv4Net& subnet, ProxyPlacement placement,
                               const AclRules& rules);
    // The bridge's raw.dnsmasq for `network`.
    std::string plan_dnsmasq(const policy::NetworkPolicy& network);
    // The host side of a confined sandbox's network, before its guest runs:
    // the firewall table, the policy file and the egress proxy. Idempotent
    // (start runs it after a host reboot).
    // With `background`, the proxy is started on another thread (the
    // returned future); the firewall table and policy are in place first.
    std::future<void> egress_up(const EgressSite& site, ProxyPlacement placement, const policy::NetworkPolicy& network,
                                const AclRules& rules, bool background);
    // egress_up from what the instance records (start: also after a host reboot).
    void restore_egress(const std::string& name, const Json& instance);
    // status: the proxy's state, its log, the DNS resolver's scope.
    void add_egress_lines(const Json& instance, InstanceInfo& info) const;
    // Removes instance, bridge and ACL, each only if present and ours.
    // Returns how many pieces existed.
    int remove_pieces(const std::string& name);
    void remove_once(const std::string& name, bool force);

    // provider_lifecycle.cpp
    // Everything after a boot: wait until ready, user bootstrap, confinement
    // check, packages, agent, mount report. `fresh` = right after create.
    void after_boot(const std::string& name, bool fresh);
    void wait_until_ready(const std::string& name, bool vm);
    std::string wait_for_address(const std::string& name, int timeout_seconds);
    // provider_confinement.cpp: the probe battery; its line for status.
    std::string check_confinement(const std::string& name, const Json& instance);
    // Records the confinement line and reports it; stops the sandbox and
    // throws when a probe escaped.
    void verify_confinement(const std::string& name, const Json& instance);
    void install_packages(const std::string& name, const std::vector<std::string>& packages);
    void install_agent(const std::string& name, const Json& instance);
    // Writes `mounts` as the instance's disk devices and record, with the
    // identity map and the containment keys (guest API off, own uid range,
    // process limit) they need; the instance must be stopped.
    void replace_mounts(const std::string& name, Json instance, const std::vector<Mount>& mounts);
    // The recorded mounts checked again (ProviderContext::recheck_mounts) from
    // the records in `config` (an instance's or a snapshot's).
    void recheck_recorded_mounts(const std::string& name, const Json& config);
    // After a start: each mount's directory inside is the very directory that
    // was checked on the host (same device and inode), else the sandbox is
    // stopped and an Error thrown. Containers only.
    void verify_started_mounts(const std::string& name, const std::vector<Mount>& mounts,
                               const std::vector<std::pair<dev_t, ino_t>>& checked);

    // provider_exec.cpp
    ExecResult run_as_root(const std::string& name, const std::string& script, int timeout_seconds);
    std::vector<std::string> incus_exec_argv(const std::string& name, const Json& instance, bool root,
                                             const std::map<std::string, std::string>& env,
                                             const std::vector<std::string>& command) const;

    // Shared helpers.
    Json require_instance(const std::string& name);  // GET; clear error if absent or not ours
    [[nodiscard]] static bool running(const Json& instance);
    [[nodiscard]] static std::string config_value(const Json& instance, std::string_view key);
    [[nodiscard]] static std::optional<GuestUser> recorded_user(const Json& instance);
    InstanceInfo to_info(const Json& instance) const;
    void set_records(const std::string& name, const std::map<std::string, std::string>& records);

    ProviderContext& m_context;
    std::unique_ptr<Client> m_client;
    std::unique_ptr<EgressHost> m_egress;
    std::unique_ptr<EgressHost> m_egress_instance;
    Api m_api;
    std::string m_project;
};

}  // namespace agentctl::provider::incus
