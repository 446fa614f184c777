// The record agentctl keeps in an Incus instance's config (the user.agentctl.*
// keys of naming.hpp), typed, read in one place and written beside it.
//
// The reader is strict: a value agentctl never writes throws agentctl::Error
// naming the instance, the key and what to do. An absent key (or an empty
// value: Incus drops a key set to "") keeps its default, so a sandbox made by
// an older agentctl and an instance agentctl did not make read as before.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentctl/confinement.hpp"
#include "agentctl/policy.hpp"
#include "agentctl/sandbox.hpp"
#include "provider/incus/client/instance.hpp"
#include "provider/incus/client/payloads.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/network/host_user.hpp"
#include "provider/incus/network/subnet_pool.hpp"

namespace agentctl::provider::incus {

// What marks an instance as agentctl's, and as which kind. Delete and gc read
// only these, so that a sandbox whose other keys are damaged can still go.
struct InstanceMarks {
    std::string name;             // the instance's name (for errors)
    bool managed = false;         // key::k_managed: agentctl made it
    std::string role;             // key::k_role: "" for a sandbox, key::k_role_egress_proxy for a companion
    std::string sandbox;          // key::k_sandbox: the sandbox a companion serves
    bool create_pending = false;  // key::k_create_pending: left by a create that did not finish
    std::string given_name;       // key::k_name: the sandbox's name when it came from the warm pool

    // agentctl's sandbox (not a companion, not another's instance).
    [[nodiscard]] bool is_sandbox() const { return managed && role.empty(); }
    [[nodiscard]] bool is_companion() const { return managed && role == key::k_role_egress_proxy; }
    // A warm pool entry not taken yet.
    [[nodiscard]] bool is_pool_entry() const { return managed && role == key::k_role_pool; }
    // The sandbox's name as its user knows it.
    [[nodiscard]] const std::string& sandbox_name() const { return given_name.empty() ? name : given_name; }
    // A sandbox left by a create that was killed.
    [[nodiscard]] bool unfinished() const { return managed && create_pending; }
};

// Everything a sandbox records.
struct SandboxRecord : InstanceMarks {
    Isolation isolation = Isolation::Container;  // key::k_isolation, else the instance's type
    std::string image;
    std::string user;                // key::k_user: the user's name as asked for
    std::optional<GuestUser> guest;  // key::k_uid and the rest once the user exists (shell "/bin/sh" if none)
    std::vector<std::string> profiles;
    std::optional<policy::NetworkPolicy> network;  // nullopt: none recorded
    std::vector<Mount> mounts;
    std::vector<PortForward> ports;
    std::vector<std::string> packages;
    std::vector<std::string> widenings;
    std::string agent;
    bool agent_installed = false;
    std::string bridge;
    std::string acl;                // empty: no ACL attached (unconfined)
    std::optional<Ipv4Net> subnet;  // the bridge's host address with its prefix
    BridgeResolver resolver = BridgeResolver::Incus;
    ProxyPlacement placement = ProxyPlacement::Host;
    HostRecord host;  // key::k_host_uid, key::k_host_state
    // The last confinement check and what it rests on (provider_evidence.cpp).
    ConfinementStatus confinement;  // parse_confinement: a line it does not know reads as Unknown
    ConfinementEvidence evidence;   // checked_at, source and probes (`missing` is status's, not recorded)
    int confinement_pid = 0;        // 0: none recorded
    std::string confinement_firewall;
    std::string confinement_acl_chain;  // empty: none recorded (status asks Incus)
};

// The marks of `instance` (GET /1.0/instances/NAME). Throws agentctl::Error
// for a boolean that is neither "true" nor "false".
[[nodiscard]] InstanceMarks read_instance_marks(const Instance& instance);
// The whole record of `instance` (or of a snapshot: snapshot_as_instance).
[[nodiscard]] SandboxRecord read_sandbox_record(const Instance& instance);
// A snapshot of `instance` as the instance it would restore (its config, named
// "INSTANCE/SNAPSHOT"), for read_sandbox_record.
[[nodiscard]] Instance snapshot_as_instance(const Instance& instance, const InstanceSnapshot& snapshot);

// The user.agentctl.* keys create writes for `spec` on a bridge `bridge` whose
// host address is subnet.host(1), with the ACL when `acl_attached`.
[[nodiscard]] std::map<std::string, std::string> sandbox_record_config(const SandboxSpec& spec,
                                                                       const std::string& bridge, const Ipv4Net& subnet,
                                                                       bool acl_attached);
// The record of an isolation ("vm" | "container"), of mounts, ports, and the widenings of a
// sandbox (the spec's), of a network policy (the policy file's JSON) and of the profiles' names.
[[nodiscard]] std::string_view isolation_record(Isolation isolation);
[[nodiscard]] std::string mounts_record(const std::vector<Mount>& mounts);
[[nodiscard]] std::string ports_record(const std::vector<PortForward>& ports);
[[nodiscard]] std::string widenings_record(const SandboxSpec& spec);
[[nodiscard]] std::string network_record(const policy::NetworkPolicy& network);
[[nodiscard]] std::string profiles_record(const std::vector<std::string>& profiles);

// The spec a record stands for, as far as widenings() reads it: its network
// policy (`network`, the record's when nullopt), mounts, ports and isolation.
[[nodiscard]] SandboxSpec widening_view(const SandboxRecord& record,
                                        const std::optional<policy::NetworkPolicy>& network = std::nullopt);

}  // namespace agentctl::provider::incus
