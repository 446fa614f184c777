// The seam between agentctl and a virtualization backend.
//
// A provider is a factory plus an instance, listed in one registry table
// (src/provider/registry.cpp). What a provider can do is described by its
// capability matrix, never discovered at run time: the CLI checks the matrix
// (the "gate") before it calls any method below, so a method is only called
// for a feature whose status is Supported, ManualWorkaround with
// --force-partial, or UnderDevelopment under --preview (to print its plan).
//
// Preview: when ProviderContext::preview is set, a method prints every backend
// command it would run (one shell-quoted line each) to ProviderContext::out and
// changes nothing. The preview lines come from the same builders as the real run.
#pragma once

#include <array>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "agentctl/capability.hpp"
#include "agentctl/confinement.hpp"
#include "agentctl/config_key.hpp"
#include "agentctl/process.hpp"
#include "agentctl/sandbox.hpp"

namespace agentctl {

// Facts about the machine agentctl runs on, behind an interface so the macOS
// code paths can be tested on Linux.
class HostPlatform {
public:
    virtual ~HostPlatform() = default;
    [[nodiscard]] virtual bool is_macos() const = 0;
    [[nodiscard]] virtual std::string sandbox_exec_path() const = 0;  // /usr/bin/sandbox-exec
};
[[nodiscard]] std::unique_ptr<HostPlatform> make_real_host_platform();

// How a provider reports progress and notices to the person at the terminal.
class Reporter {
public:
    virtual ~Reporter() = default;
    virtual void step(std::string_view message) = 0;     // a step of a long operation
    virtual void notice(std::string_view message) = 0;   // `agentctl: ...` on stderr
    virtual void warning(std::string_view message) = 0;  // `WARNING: ...` on stderr, never suppressed
    // The running step failed: it is shown as failed (not "ok"), and what is
    // printed next (cleanup steps, the error) stands on its own lines after it.
    virtual void fail_step() {}
};

// The start-time check of a sandbox's recorded mounts, which the CLI's
// lifecycle supplies to every provider: checks the recorded mounts of sandbox
// NAME again with the rules `create` applied (the mountPolicy of `profiles`,
// the built-in deny list), from their canonical paths, and throws
// agentctl::Error when one is refused or no longer resolves to the recorded
// path. Every provider calls it (through common::recheck_recorded_mounts)
// right before anything boots with recorded mounts (start, snapshot restore).
class MountChecker {
public:
    MountChecker() = default;
    MountChecker(const MountChecker&) = delete;
    MountChecker& operator=(const MountChecker&) = delete;
    virtual ~MountChecker() = default;

    virtual void recheck(const std::string& name, const std::vector<std::string>& profiles,
                         const std::vector<Mount>& recorded) const = 0;
};

struct ProviderContext {
    ProcessRunner& runner;
    const HostPlatform& platform;
    // Everything agentctl itself says to the person: steps, notices, warnings.
    Reporter& reporter;
    std::ostream& out;  // preview lines, results, and a command's output (exec)
    // Required, with no default: a context cannot be built without the check.
    const MountChecker& mount_checker;
    bool preview = false;
    std::string config_dir = {};                       // core::config_dir(): configuration only, never state
    std::string self_exe = {};                         // this agentctl binary, for `agentctl egress-proxy`
    std::map<std::string, std::string> settings = {};  // config values (e.g. incus.subnetPool)
    // core::state_dir() (~/.local/state/agentctl): per-sandbox state and logs live
    // below it, in `<state_dir>/<provider>/<name>/`. Private (0700).
    std::string state_dir = {};
    // core::runtime_dir() ($XDG_RUNTIME_DIR/agentctl): locks and pid files. Private (0700).
    std::string runtime_dir = {};
    // Where the locks every agentctl on this machine shares live (a sandbox's
    // name, the host's bridges and subnets, a published port): /run/lock.
    // Tests give one of their own, so they never wait for or block a real run.
    std::string host_lock_dir = "/run/lock";
};

// A process that enforces a sandbox's policy (its egress proxy, its resolver),
// as `status` reports it.
struct HostProcess {
    std::string listen;  // ADDRESS:PORT
    bool running = false;
    int pid = 0;          // 0: not running (or not known where it runs)
    std::string user;     // the user it runs as
    std::string where;    // "host" | "instance NAME" | "bridge" (Incus's own dnsmasq)
    std::string scope;    // resolver: what it answers
    std::string log;      // proxy: its decision log
    std::string problem;  // not running: why, when known
};

struct InstanceInfo {
    std::string name;
    std::string provider;
    std::string status;    // Running | Stopped | ...
    std::string location;  // the cluster member it runs on; empty when the backend is not a cluster
    std::string image;
    std::vector<std::string> profiles;
    std::string created_at;  // RFC 3339
    std::vector<std::string> ips;
    std::vector<Mount> mounts;
    std::vector<PortForward> ports;  // every published port
    std::string isolation;           // vm | container
    std::string user;
    std::optional<policy::NetworkPolicy> network;  // nullopt: unknown
    // The sandbox's own resolver answers allowlisted names only (Incus: the
    // bridge's dnsmasq), forwarding them to network.dns.servers or the host's.
    bool dns_allowlisted_only = false;
    ConfinementStatus confinement;            // "verified (...)", "not verified: <why>", empty when not known
    ConfinementEvidence evidence;             // the probes and the checks behind `confinement`
    std::optional<HostProcess> egress_proxy;  // the sandbox's egress proxy (nullopt: it has none)
    std::optional<HostProcess> resolver;      // the sandbox's resolver (nullopt: it has none)
    std::vector<std::string> widenings;
    std::vector<std::pair<std::string, std::string>> extra;  // provider-specific key/values
};

struct ExecRequest {
    std::vector<std::string> argv;
    bool root = false;
    // Hand the terminal to the backend's client (a tty in the guest). The CLI
    // asks for it only when stdin is a terminal.
    bool tty = false;
    // Without a tty: pass this process's stdin to the command until its
    // end-of-file (pipes, files, binary data). False: the command reads
    // end-of-file at once.
    bool forward_stdin = false;
    std::map<std::string, std::string> env;  // over the sandbox's defaults (PATH, HOME, ...)
    std::string cwd;                         // absolute; empty: the user's home (root's with root)
};

struct StartRequest {
    // Mounts to apply before booting (from --mount/--mount-only/--mount-none);
    // nullopt keeps the sticky set from the last create/start.
    std::optional<std::vector<Mount>> mounts;
};

struct StopRequest {
    bool force = false;
    std::optional<int> timeout_seconds;
};

// `agentctl logs NAME --network` (egress_proxy::print_network_log).
struct LogRequest {
    bool follow = false;
    bool json = false;                // raw JSON Lines instead of a rendered table
    std::string since;                // only lines from this time on (RFC 3339 UTC, parse_since); empty: all
    std::optional<std::size_t> tail;  // only the last N lines (before following)
    bool summary = false;             // one row per destination instead of the lines
    // `policy propose`: an allow file or a profile proposed from the lines
    // (egress_proxy/log_proposal.hpp) instead of them.
    enum class Proposal { None, AllowFile, Profile };
    Proposal proposal = Proposal::None;
    bool wildcards = false;  // a proposal groups names under one parent into *.parent
    std::string sandbox;     // the sandbox a proposal names
};

struct SnapshotInfo {
    std::string name;
    std::string created_at;
    bool stateful = false;
};

// ---- The parts of a provider: one interface per capability group.
//
// A provider implements the parts it has code for (Implements<...> below) and
// nothing else: no method exists only to refuse. Each part lists the features
// it provides; a provider's capability matrix starts from those
// (Implements::base_capabilities), so a feature of a part the provider lacks is
// NotAvailable, or UnderDevelopment where the provider says so, and never
// Supported. The CLI reaches a part only after the gate let one of its
// features through, which guarantees the provider has it. `logs.exec` belongs
// to no part yet: exec logging is not built on any provider.

// Creating, booting, stopping, removing and inspecting sandboxes. Every provider
// has it; create's options (mounts, ports, packages, placement) are its features.
// clang-format off
class Lifecycle {
public:
    static constexpr std::array<Feature, 12> k_features{
        "create",   "start",    "stop",    "delete", "list", "status", "fs.mount", "fs.mount.readonly",
        "network.port-publish", "provision.packages", "placement.target", "network.credentials"};
    // clang-format on
    virtual ~Lifecycle() = default;

    // Creates the instance with everything in `spec` applied: limits, mounts,
    // ports, the non-root user and the network policy. MUST leave nothing behind
    // when it fails part-way. MUST refuse an existing instance of that name.
    virtual void create(const SandboxSpec& spec) = 0;

    // Boots the instance with its network policy in force, prints the active
    // mount set, and reports confinement. MUST NOT leave an instance running
    // whose confinement check found a way out.
    virtual void start(const std::string& name, const StartRequest& request) = 0;

    virtual void stop(const std::string& name, const StopRequest& request) = 0;

    // Removes the instance and everything agentctl made for it (network, ACL,
    // proxy state). Succeeds on a half-created instance. `force` stops it first.
    virtual void remove(const std::string& name, bool force) = 0;

    [[nodiscard]] virtual std::vector<InstanceInfo> list() = 0;
    [[nodiscard]] virtual InstanceInfo status(const std::string& name) = 0;

    // `secret set NAME`: hands the secret's new value to the egress proxy of
    // every running sandbox that uses it, without restarting anything; one
    // sentence per sandbox it reached or could not reach. MUST NOT pass the
    // value by argument, environment or file. A provider that injects no
    // secrets reaches none.
    virtual std::vector<std::string> refresh_secret(const std::string& secret) {
        (void)secret;
        return {};
    }
};

// Running commands in a sandbox.
class Commands {
public:
    static constexpr std::array<Feature, 2> k_features{"exec", "shell"};

    virtual ~Commands() = default;

    // Runs a command as the sandbox user (or root) and returns its exit code:
    // 0-255 as the command exited, 128+N when signal N killed it, 127 (with an
    // agentctl::Error of that code) when it was not found and 126 when it
    // could not be run. Non-interactive, its output and error output reach
    // this process's stdout and stderr (ProviderContext::out flushed first);
    // with request.tty the client gets the terminal.
    virtual int exec(const std::string& name, const ExecRequest& request) = 0;
    // An interactive login shell as the sandbox user (or root); its exit code.
    virtual int shell(const std::string& name, bool root) = 0;
};

// The sandbox's graphical console.
class Console {
public:
    static constexpr std::array<Feature, 1> k_features{"view"};

    virtual ~Console() = default;

    // Opens the console; `read_only` watches without sending input.
    virtual void view(const std::string& name, bool read_only) = 0;
};

// The egress proxy's record of allowed and refused connections.
class EgressLog {
public:
    static constexpr std::array<Feature, 1> k_features{"logs.network"};

    virtual ~EgressLog() = default;

    // Prints the sandbox's network decisions to ProviderContext::out (follows
    // them with request.follow) and returns the exit code.
    virtual int logs(const std::string& name, const LogRequest& request) = 0;
};
// clang-format off
class Snapshots {
public:
    static constexpr std::array<Feature, 4> k_features{"snapshot.create", "snapshot.list", "snapshot.restore",
                                                      "snapshot.delete"};
    // clang-format on
    virtual ~Snapshots() = default;

    virtual void snapshot_create(const std::string& name, const std::string& snapshot) = 0;
    [[nodiscard]] virtual std::vector<SnapshotInfo> snapshot_list(const std::string& name) = 0;
    // Rolls the sandbox back to `snapshot`; the restored mounts are checked
    // again (ProviderContext::mount_checker) before anything boots with them.
    virtual void snapshot_restore(const std::string& name, const std::string& snapshot) = 0;
    virtual void snapshot_delete(const std::string& name, const std::string& snapshot) = 0;
};

// A local image store.
class Images {
public:
    static constexpr std::array<Feature, 2> k_features{"image.pull", "image.build"};

    virtual ~Images() = default;

    virtual void image_pull(const std::string& ref) = 0;
    // Builds image `output` from `base` plus `packages`; an empty `base` means
    // the provider's own base built from nothing.
    virtual void image_build(const std::string& output, const std::string& base,
                             const std::vector<std::string>& packages) = 0;
};

// Default-deny egress. A provider that enforces a network policy at create
// can also replace it, so the policy's features live here: without this part
// every policy is refused (create needs --no-network-policy).
class EgressPolicy {
public:
    static constexpr std::array<Feature, 2> k_features{"network.acl", "network.deny-lan"};

    virtual ~EgressPolicy() = default;

    // Replaces a (possibly running) sandbox's network policy in place; used by
    // `policy add/remove`. MUST NOT restart the instance.
    virtual void apply_network_policy(const std::string& name, const policy::NetworkPolicy& network) = 0;
};

// What `agentctl gc` found: one thing agentctl made whose sandbox is gone.
struct Leftover {
    std::string kind;     // "instance", "bridge", "network ACL", "nft table", "egress proxy", ...
    std::string name;     // as the backend or the host names it
    std::string sandbox;  // the sandbox it was made for; empty when only its name is known
    bool removed = false;
    std::string problem;  // not removed: why
};

// Finding and removing what agentctl made whose sandbox is gone (an
// interrupted create or delete, a sandbox deleted behind agentctl's back).
class Collector {
public:
    static constexpr std::array<Feature, 1> k_features{"gc"};

    virtual ~Collector() = default;

    // Every leftover, removed (under --preview: only found, nothing changes).
    // MUST NOT touch anything agentctl did not make, or that belongs to a
    // sandbox that exists or that another agentctl is creating or deleting now.
    [[nodiscard]] virtual std::vector<Leftover> collect() = 0;
};

// A warm pool: sandboxes made ahead of time, deny-all and never a sandbox of
// anyone's until a create takes one, so that create only has to apply its
// policy to a running instance.
struct PoolEntry {
    std::string name;    // as the backend names it
    std::string status;  // the backend's word: Running, Stopped, ...
    bool ready = false;  // a create may take it now
};

class WarmPool {
public:
    static constexpr std::array<Feature, 1> k_features{"pool"};

    virtual ~WarmPool() = default;

    // How many entries the pool keeps (the provider's setting).
    [[nodiscard]] virtual unsigned pool_size() = 0;
    [[nodiscard]] virtual std::vector<PoolEntry> pool_entries() = 0;
    // Makes entries like `like` (a create's spec: its name is not used, and
    // its network policy is one that allows nothing while the entry waits)
    // until the pool holds pool_size() ready ones; removes the ones made
    // otherwise (another image, resources, agentctl) and the ones beyond the
    // size. Returns how many it made.
    virtual unsigned pool_fill(const SandboxSpec& like) = 0;
    // Removes every entry; returns how many.
    virtual unsigned pool_drain() = 0;
};

// A provider instance: its name and version, and its parts. A part it does not
// implement is nullptr (Lifecycle it always has). Providers derive from
// Implements<...>, which answers these from the parts it is given.
class Provider {
public:
    virtual ~Provider() = default;

    [[nodiscard]] virtual std::string_view name() const = 0;

    // The backend's own name and version for `agentctl version` ("Incus 6.0.4").
    // Empty when the provider has no way to ask; throws agentctl::Error saying
    // why when the backend cannot be reached.
    [[nodiscard]] virtual std::string backend_version() { return {}; }

    [[nodiscard]] virtual Lifecycle& lifecycle() = 0;
    [[nodiscard]] virtual Commands* commands() = 0;
    [[nodiscard]] virtual Console* console() = 0;
    [[nodiscard]] virtual EgressLog* egress_log() = 0;
    [[nodiscard]] virtual Snapshots* snapshots() = 0;
    [[nodiscard]] virtual Images* images() = 0;
    [[nodiscard]] virtual EgressPolicy* egress_policy() = 0;
    [[nodiscard]] virtual Collector* collector() = 0;
    [[nodiscard]] virtual WarmPool* warm_pool() = 0;
};

// The base of a provider class that implements `Parts` (Lifecycle among them):
// `class LimaBackend final : public Implements<Lifecycle, Commands, ...>`.
// The list of parts is the one statement of what the provider has code for.
template <class... Parts>
class Implements : public Provider, public Parts... {
    template <class Part>
    static constexpr bool k_has = (std::is_same_v<Part, Parts> || ...);
    static_assert(k_has<Lifecycle>, "every provider implements Lifecycle");

public:
    // The matrix the provider's capabilities() starts from: every feature of
    // `Parts` Supported, every other feature NotAvailable.
    [[nodiscard]] static CapabilityMatrix base_capabilities() {
        return CapabilityMatrix({std::span<const Feature>(Parts::k_features)...});
    }

    [[nodiscard]] Lifecycle& lifecycle() final { return *this; }
    [[nodiscard]] Commands* commands() final { return part<Commands>(); }
    [[nodiscard]] Console* console() final { return part<Console>(); }
    [[nodiscard]] EgressLog* egress_log() final { return part<EgressLog>(); }
    [[nodiscard]] Snapshots* snapshots() final { return part<Snapshots>(); }
    [[nodiscard]] Images* images() final { return part<Images>(); }
    [[nodiscard]] EgressPolicy* egress_policy() final { return part<EgressPolicy>(); }
    [[nodiscard]] Collector* collector() final { return part<Collector>(); }
    [[nodiscard]] WarmPool* warm_pool() final { return part<WarmPool>(); }

private:
    template <class Part>
    Part* part() {
        if constexpr (k_has<Part>) {
            return this;
        } else {
            return nullptr;
        }
    }
};

// One entry of the provider registry: everything agentctl knows about a
// provider outside the provider itself.
struct ProviderEntry {
    std::string_view name;         // --provider NAME, `provider: NAME` in the configuration
    std::string_view title;        // the backend as a sentence names it ("Incus")
    std::string_view description;  // one line for `capabilities` and the manual
    CapabilityMatrix (*capabilities)(const HostPlatform& platform);
    std::unique_ptr<Provider> (*create)(ProviderContext& context);
    // How the provider enforces a network policy, as a phrase for `policy check`.
    std::string_view egress = {};
    // The provider's configuration keys (`incus.*`), with their validators and
    // defaults; null: it has none. They reach the provider in
    // ProviderContext::settings.
    std::span<const ConfigKey> (*settings)() = nullptr;
    // The setting the global `--remote NAME` stands for ("incus.remote");
    // empty: the backend has no remotes, and --remote is refused.
    std::string_view remote_setting = {};
    // The setting the global `--project NAME` stands for ("incus.project"),
    // offered by the same provider as --remote.
    std::string_view project_setting = {};
};

// Every compiled-in provider, in display order.
[[nodiscard]] std::span<const ProviderEntry> providers();
[[nodiscard]] const ProviderEntry* find_provider(std::string_view name);
// The registry's names in display order, joined by `separator` (e.g. "incus|lima|hyperv").
[[nodiscard]] std::string provider_names(std::string_view separator);
// The provider whose remotes `--remote` names (the one with a remote_setting);
// nullptr when none has remotes.
[[nodiscard]] const ProviderEntry* remote_provider();

// Every configuration key, in display order: `provider` (one of the names
// above), core's generic keys (core/config.hpp), then each provider's
// settings. The one table `agentctl config` loads, lists and completes.
[[nodiscard]] std::span<const ConfigKey> config_keys();
// The key of that name in config_keys(), or nullptr.
[[nodiscard]] const ConfigKey* find_config_key(std::string_view name);

}  // namespace agentctl
