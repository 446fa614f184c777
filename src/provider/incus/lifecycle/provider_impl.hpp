// The Incus provider class, shared by the provider_*.cpp files (one per group
// of verbs). Only the factory in incus_provider.hpp is public.
#pragma once

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <sys/types.h>
#include <string>

#include "agentctl/provider.hpp"
#include "core/files.hpp"
#include "provider/incus/network/acl_rules.hpp"
#include "provider/incus/client/api.hpp"
#include "provider/common/probes.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/client/payloads.hpp"
#include "provider/incus/client/server.hpp"
#include "provider/incus/lifecycle/sandbox_record.hpp"
#include "provider/incus/lifecycle/settings.hpp"
#include "provider/incus/lifecycle/start_gate.hpp"

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

// provider_pool.cpp: a digest of what a sandbox of `spec` made from `image`
// could not change once it runs; nullopt when the warm pool cannot serve it
// (mounts, ports, packages, an agent, secrets, a target, a VM, no policy).
[[nodiscard]] std::optional<std::string> pool_template_digest(const SandboxSpec& spec, const std::string& image);

class IncusProvider final
    : public Implements<Lifecycle, Commands, Console, EgressLog, Snapshots, Images, EgressPolicy, Collector, WarmPool> {
public:
    // `egress`: the host placement of the sandboxes' proxies; `egress_instance`:
    // the companion-instance placement (egress_host.hpp).
    IncusProvider(ProviderContext& context, std::unique_ptr<Client> client, std::unique_ptr<EgressHost> egress,
                  std::unique_ptr<EgressHost> egress_instance, Server server);

    // The server this provider talks to, and whether it is this machine
    // (server.hpp: is_this_machine). Host-side work (the egress proxy on the
    // bridge's host address, nftables, agentctl's resolver, host mounts and
    // ports, the probe battery's canary) is only right when it is.
    [[nodiscard]] const Server& server() const { return m_server; }
    [[nodiscard]] bool server_is_this_machine() const { return m_server.this_machine; }

    [[nodiscard]] std::string_view name() const override { return "incus"; }
    [[nodiscard]] std::string backend_version() override;

    void create(const SandboxSpec& spec) override;
    void start(const std::string& name, const StartRequest& request) override;
    void stop(const std::string& name, const StopRequest& request) override;
    void remove(const std::string& name, bool force) override;
    [[nodiscard]] std::vector<InstanceInfo> list() override;
    [[nodiscard]] InstanceInfo status(const std::string& name) override;
    std::vector<std::string> refresh_secret(const std::string& secret) override {
        return m_egress->refresh_secret(secret);
    }
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
    [[nodiscard]] std::vector<Leftover> collect() override;
    [[nodiscard]] unsigned pool_size() override;
    [[nodiscard]] std::vector<PoolEntry> pool_entries() override;
    unsigned pool_fill(const SandboxSpec& like) override;
    unsigned pool_drain() override;

private:
    // One run of the confinement probe battery (provider_confinement.cpp).
    struct ProbeRun {
        ConfinementStatus not_verified;  // set: no probe ran, and this is why (the line for status)
        std::vector<common::ProbeResult> results;
        std::chrono::milliseconds elapsed{0};
        ProxyPlacement placement = ProxyPlacement::Host;  // where the sandbox's proxy runs
        bool by_host = false;  // agentctl probed from the host (the container's namespace), not the guest
        int pid = 0;           // the instance's init (or VM) pid when it was probed

        static ProbeRun unverified(ConfinementState state, std::string why) {
            ProbeRun run;
            run.not_verified = {state, std::move(why)};
            return run;
        }
    };

    // provider_images.cpp
    void build_from_nothing(const std::string& output, const std::vector<std::string>& packages);

    // provider_pool.cpp
    // The pool works only with a server on this machine, and not in preview.
    [[nodiscard]] bool pool_usable() const;
    void refuse_pool_elsewhere() const;
    // An entry a create may take now: running, and finished.
    [[nodiscard]] static bool entry_ready(const Instance& instance);
    // Removes pool entry `entry` under its lock, if it still is one.
    bool remove_entry(const std::string& entry);
    // create: takes a ready entry for `spec` and makes it the sandbox (its
    // name, profiles, policy, verdict); false when none fits or is free.
    bool take_from_pool(const SandboxSpec& spec);
    // Starts `agentctl pool fill` detached, when the pool is in use.
    void refill_in_background();
    // The instance of sandbox `name`: its own, else the pool entry that became
    // it; `name` when there is neither (the caller says so). Every verb that
    // takes a sandbox's name asks this first.
    [[nodiscard]] std::string instance_of(const std::string& name);
    // The same with the instance's GET it took (nullopt: no such sandbox),
    // for a verb that reads the instance anyway.
    struct FoundSandbox {
        std::string name;  // the instance's
        std::optional<Instance> instance;
    };
    [[nodiscard]] FoundSandbox find_sandbox(const std::string& name);
    // Throws when `instance` is a pool entry (no verb takes one by its name).
    static void refuse_pool_entry(const Instance& instance);
    // The instance a pool entry became for sandbox `name`, if one did.
    [[nodiscard]] std::optional<Instance> taken_as(const std::string& name);

    // provider_create.cpp
    // Everything of a create after the checks that need the name alone;
    // `marks` go into the instance's config (a pool entry's role).
    void make_sandbox(const SandboxSpec& requested, const std::map<std::string, std::string>& marks);
    // Throws when `mounts` is not empty and the server is not this machine:
    // the host paths would name the server's directories.
    void refuse_mounts_elsewhere(const std::vector<Mount>& mounts) const;
    std::string image_for(const SandboxSpec& spec);
    // The cluster member for the instance (empty: Incus places it), checked
    // before anything is made (cluster.hpp, plan_placement).
    std::string place(const SandboxSpec& spec);
    // The host's network lock (host_network_lock_path), held from before a
    // bridge's subnet and host ids are chosen until it exists, and around
    // every change and delete of a bridge; null under --preview.
    [[nodiscard]] std::unique_ptr<core::FileLock> lock_network() const;
    // The host's lock of sandbox `name` (host_sandbox_lock_path), held by
    // create and delete from start to end; null under --preview.
    [[nodiscard]] std::unique_ptr<core::FileLock> lock_sandbox(const std::string& name) const;
    // What a create or start says while it waits for a host port's lock (reserve_host_ports).
    [[nodiscard]] std::function<void(const PortForward&)> port_wait_notice() const;
    // POST /1.0/networks for the sandbox's bridge; in a cluster first pending
    // on every member, then globally (Incus's two-step contract).
    // Under --preview, a `target` stands for the cluster's members.
    void create_bridge(const Json& network, const std::string& target);
    // PATCH of a bridge's config, under the host's network lock.
    void patch_bridge(const std::string& bridge, const Json& config);
    void create_pieces(const SandboxSpec& spec, const std::map<std::string, std::string>& marks);
    Ipv4Net choose_subnet();
    // A uid of its own for the host processes of `name` (host_user.hpp), with
    // its files in this agentctl's state directory; the caller holds
    // lock_network().
    HostRecord new_host_record(const std::string& name);
    // For a sandbox made before it had one: a new record, written on its
    // bridge and instance (under the lock).
    HostRecord record_host_user(const std::string& name);
    // The ACL for `network` on the bridge of `subnet` (its host address), with
    // the proxy where `placement` puts it. Reports the notes when `report`.
    AclRules plan_acl(const std::string& sandbox, const policy::NetworkPolicy& network, const Ipv4Net& subnet,
                      ProxyPlacement placement, bool report = true);
    // incus.proxyPlacement for a new sandbox (choose_proxy_placement).
    ProxyPlacement placement_setting() const;
    // The egress host of a placement (a sandbox's is record.placement), and
    // the site a sandbox's proxy serves.
    EgressHost& egress(ProxyPlacement placement) const;
    static EgressSite site_of(const std::string& name, const SandboxRecord& record);
    // The firewall table of a sandbox's bridge for `rules`.
    FirewallSpec firewall_spec(const std::string& bridge, const Ipv4Net& subnet, ProxyPlacement placement,
                               const AclRules& rules, const policy::NetworkPolicy& network);
    // The resolver's allowlist for `network` (dns_servers with the upstreams
    // of this host or of network.dns.servers).
    std::vector<std::string> plan_dns_servers(const policy::NetworkPolicy& network);
    // The bridge's raw.dnsmasq for `network` (when Incus runs the resolver).
    std::string plan_dnsmasq(const policy::NetworkPolicy& network);
    // agentctl's resolver on the bridge whose host address is `bridge_net`.
    ResolverSpec plan_resolver(const std::string& bridge, const Ipv4Net& bridge_net,
                               const policy::NetworkPolicy& network);
    // Who serves DHCP and DNS on a new bridge.
    [[nodiscard]] BridgeResolver resolver_for(bool confined, ProxyPlacement placement) const;
    // The host side of a confined sandbox's network, before its guest runs:
    // the firewall table, the policy file, the resolver (when agentctl runs
    // it) and the egress proxy. Idempotent (start runs it after a host reboot).
    // With `background`, resolver and proxy are started on another thread
    // (the returned future); the firewall table and policy are in place first.
    std::future<void> egress_up(const EgressSite& site, ProxyPlacement placement, const policy::NetworkPolicy& network,
                                const AclRules& rules, BridgeResolver resolver, bool background);
    // Stops the sandbox's egress proxy and resolver, saying so for each that ran.
    void stop_egress_services(const EgressSite& site, EgressHost& host);
    // The same for the sandbox `name` (its site from its instance).
    void stop_egress_services(const std::string& name, EgressHost& host);
    // egress_up from what the instance records (start: also after a host reboot).
    void restore_egress(const std::string& name, const SandboxRecord& record);
    // status: the proxy's state, its log, the DNS resolver's scope.
    void add_egress_lines(const SandboxRecord& record, InstanceInfo& info) const;
    // Removes instance, bridge and ACL, each only if present and ours, and
    // the host's pieces (processes, firewall table, state); once the instance
    // is gone, a piece that cannot go does not keep the others (the first
    // failure is thrown after). Returns how many Incus pieces existed.
    int remove_pieces(const std::string& name);
    // The sandbox's bridge (under the host's network lock) and its ACL, each
    // only if ours; true when one was deleted.
    bool remove_bridge(const std::string& name);
    bool remove_acl(const std::string& name);
    // A bridge or ACL payload, marked with this provider's project (bridges and
    // ACLs live in the default project, shared by every project).
    [[nodiscard]] Json in_project(Json payload) const;
    // The sandbox a bridge or ACL was made for ("" = not agentctl's, or a
    // bridge a killed create left pending without config).
    [[nodiscard]] static std::string owner_of(const Json& piece);
    // The project a bridge or ACL was made for ("" = the default project).
    [[nodiscard]] static std::string project_of(const Json& piece);
    // A create may not take a name whose bridge or ACL another project's
    // sandbox holds: throws agentctl::Error naming that project.
    void refuse_name_of_other_project(const std::string& name);
    void remove_once(const std::string& name, bool force);

    // provider_gc.cpp: the leftovers as they are now. `held`: the sandbox locks
    // gc holds, null for a sandbox whose lock another agentctl holds (it is
    // left out, and said so once).
    struct Scan;
    std::vector<Leftover> find_leftovers(std::map<std::string, std::unique_ptr<core::FileLock>>& held);
    // Removes the leftovers of sandbox `name` (gc holds its lock).
    void remove_leftovers_of(const std::string& name);
    // Removes the host's firewall tables and cgroups of bridges that no
    // longer exist, under the host's network lock.
    void remove_stray_host_pieces(const std::vector<Leftover>& found);

    // provider_lifecycle.cpp
    // Everything after a boot: wait until ready, user bootstrap, confinement
    // check, packages, agent, mount report. `fresh` = right after create.
    void after_boot(const std::string& name, bool fresh, std::future<ProbeRun> probes = {});
    void wait_until_ready(const std::string& name, bool vm);
    // eth0's IPv4 address once it has one ("" when the time ran out); the
    // state it was read from; the address in a state.
    std::string wait_for_address(const std::string& name, int timeout_seconds);
    InstanceState wait_for_address_state(const std::string& name, int timeout_seconds);
    [[nodiscard]] static std::string eth0_address(const InstanceState& state);
    // provider_confinement.cpp: the probe battery; its line for status.
    // Runs the battery in the guest; changes nothing (safe on another thread).
    ProbeRun run_probe_battery(const std::string& name, const SandboxRecord& record);
    // Records a run; stops the sandbox and throws when a probe escaped.
    // Returns the confinement line.
    // `also`: records written with the run's (the end of a create).
    ConfinementStatus record_probes(const std::string& name, const ProbeRun& run,
                                    const std::map<std::string, std::string>& also = {});
    // Records the confinement line and reports it; stops the sandbox and
    // throws when a probe escaped. `early`: a battery already under way.
    void verify_confinement(const std::string& name, const SandboxRecord& record, std::future<ProbeRun> early = {},
                            const std::map<std::string, std::string>& also = {});
    // provider_network.cpp: apply_network_policy on instance `name`; `also`
    // is recorded with the verdict (or with the policy of a stopped sandbox).
    void apply_policy(const std::string& name, const policy::NetworkPolicy& network,
                      const std::map<std::string, std::string>& also);
    // provider_evidence.cpp: what start re-applies and status checks again.
    // A digest of what `nft LISTING` prints as the kernel has it now (read
    // in process: nft_library.hpp); empty when nft refuses the listing
    // (something listed does not exist). What records made before kernel
    // digests (nft_kernel.hpp) hold, and what is recorded where the kernel
    // cannot be asked.
    std::string nft_digest(const std::string& listing);
    // The digest of agentctl's nft table of `bridge` (firewall) and of the
    // chain Incus made of its ACL (acl_chain), as the kernel has them now:
    // of the same kind as `recorded` (a kernel digest, unless `recorded` is
    // an nft_digest); empty when the table or chain does not exist.
    std::string firewall_digest(const std::string& bridge, const std::string& recorded = {});
    std::string acl_chain_digest(const std::string& bridge, const std::string& recorded = {});
    // start: the sandbox's ACL with `rules`, attached to its bridge with
    // reject defaults (re-attached, and said so, when someone detached it).
    // `network`: the bridge as Incus answered it (nullopt: missing).
    void reattach_acl(const std::string& name, const AclRules& rules, const std::optional<Json>& network);
    // The records of one probe run and its line (verify_confinement).
    std::map<std::string, std::string> evidence_records(const std::string& name, const ProbeRun& run,
                                                        const ConfinementStatus& line);
    // status: the queries that need only the sandbox's name, started at once,
    // each on a thread of its own, to run while the instance's GET does.
    // Destroying it waits for both (nothing is left running).
    struct StatusQueries {
        std::future<std::optional<Json>> bridge;  // GET of the sandbox's bridge; not valid: not started
        // firewall_digest and acl_chain_digest of the bridge (kernel
        // digests); not valid: not started
        std::future<std::pair<std::string, std::string>> kernel;
    };
    StatusQueries start_status_queries(const std::string& name);
    // status: the confinement line and its evidence as of now. "verified"
    // only while the sandbox runs as verified and everything that enforces
    // its policy is in place (ACL attached, nft table as verified, proxy and
    // resolver running); else what is missing and how to restore it.
    // `early`: the queries status started with the instance's GET.
    void judge_confinement(const std::string& name, const Instance& instance, const SandboxRecord& record,
                           InstanceInfo& info, StatusQueries& early);
    // Instance placement: a sentence naming what Incus has on the sandbox's
    // bridge besides the sandbox and its companion (bridge_strangers), empty
    // when nothing. Status is not "verified" and start refuses while it is not empty.
    [[nodiscard]] std::string strangers_problem(const std::string& name, const std::string& bridge,
                                                const Json& network);
    // to_info: the recorded line and evidence; a stopped sandbox is "not
    // verified" now (when it was last verified is kept in the line).
    static void read_evidence(const Instance& instance, const SandboxRecord& record, InstanceInfo& info);
    void install_packages(const std::string& name, const std::vector<std::string>& packages);
    void install_agent(const std::string& name, const SandboxRecord& record, bool fresh);
    // Binds the accounts the image ALIAS records to it (image_bootstrap.hpp,
    // accounts_binding), once `image build` made it.
    void bind_image_accounts(const std::string& alias);
    // Refuses --agent before anything is made when the image says it lacks a
    // tool the agent's installer needs (provider_create.cpp). `image`: as
    // Incus has it (Api::image, with what agentctl recorded on the images it
    // builds, image_bootstrap.hpp); nullopt when it was not read.
    void refuse_agent_without_tools(const SandboxSpec& spec, const std::optional<Json>& image);
    // Refuses a sandbox user that would not get the uid its writable mounts
    // are mapped to (their owner's) before anything is made, when the image
    // records its accounts; a preview of an image that does not says it
    // cannot tell.
    void refuse_uid_clash_early(const SandboxSpec& spec, const std::optional<Json>& image);
    // Writes `mounts` as the instance's disk devices and record, with the
    // identity map and the containment keys (guest API off, own uid range,
    // process limit) they need; the instance must be stopped.
    void replace_mounts(const std::string& name, Instance instance, const std::vector<Mount>& mounts);
    // The recorded mounts checked again (ProviderContext::mount_checker) from
    // `record` (an instance's or a snapshot's).
    void recheck_recorded_mounts(const std::string& name, const SandboxRecord& record);
    // After a start: each mount's directory inside is the very directory that
    // was checked on the host (same device and inode), else the sandbox is
    // stopped and an Error thrown. Containers only.
    void verify_started_mounts(const std::string& name, const std::vector<Mount>& mounts,
                               const std::vector<std::pair<dev_t, ino_t>>& checked);

    // The pass for one start of a container on this machine (start_gate.hpp),
    // with the instance's hook line put in place first when it is missing or
    // names another pass; null for a VM, a server elsewhere, or --preview.
    std::unique_ptr<StartPass> open_start_gate(const std::string& name, const Instance& instance, Isolation isolation);
    [[nodiscard]] bool gated(Isolation isolation) const;
    [[nodiscard]] std::string start_pass(const std::string& name) const;

    // provider_exec.cpp
    ExecResult run_as_root(const std::string& name, const std::string& script, int timeout_seconds);
    // `user`: the sandbox user the command runs as; null: root.
    std::vector<std::string> incus_exec_argv(const std::string& name, const GuestUser* user,
                                             const std::map<std::string, std::string>& env,
                                             const std::vector<std::string>& command,
                                             const std::string& cwd = {}) const;
    void require_directory(const std::string& name, const GuestUser* user, const ExecRequest& request);
    int exec_outcome(const std::string& name, const std::string& operation, const ExecRequest& request,
                     const GuestUser* user);

    // Shared helpers.
    // NAME as the incus client addresses it on this server: REMOTE:NAME for a remote.
    [[nodiscard]] std::string on_server(const std::string& name) const;
    Instance require_instance(const std::string& name);  // GET; clear error if absent or not ours
    // `instance` (the GET of `name`) when it is a sandbox of agentctl's; the same errors.
    Instance checked(const std::string& name, std::optional<Instance> instance) const;
    InstanceInfo to_info(const Instance& instance, const SandboxRecord& record) const;
    void set_records(const std::string& name, const std::map<std::string, std::string>& records);

    ProviderContext& m_context;
    std::unique_ptr<Client> m_client;
    std::unique_ptr<EgressHost> m_egress;
    std::unique_ptr<EgressHost> m_egress_instance;
    Api m_api;
    Server m_server;
    std::string m_project;
};

}  // namespace agentctl::provider::incus
