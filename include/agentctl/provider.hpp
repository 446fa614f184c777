// The seam between agentctl and a virtualization backend.
//
// A provider is a factory plus an instance, listed in one registry table
// (src/provider/registry.cpp). What a provider can do is described by its
// capability matrix, never discovered at run time: the CLI checks the matrix
// (the "gate") before it calls any method below, so a method is only called
// for a feature whose status is Supported or ManualWorkaround+--force-partial.
//
// Preview: when ProviderContext::preview is set, a method prints every backend
// command it would run (one shell-quoted line each) to ProviderContext::out and
// changes nothing. The preview lines come from the same builders as the real run.
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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

struct ProviderContext {
    ProcessRunner& runner;
    const HostPlatform& platform;
    Reporter& reporter;
    std::ostream& out;  // preview lines and command output
    bool preview = false;
    std::string config_dir;                       // core::config_dir(): configuration only, never state
    std::string self_exe;                         // this agentctl binary, for `agentctl egress-proxy`
    std::map<std::string, std::string> settings;  // config values (e.g. incus.subnetPool)
    // core::state_dir() (~/.local/state/agentctl): per-sandbox state and logs live
    // below it, in `<state_dir>/<provider>/<name>/`. Private (0700).
    std::string state_dir;
    // core::runtime_dir() ($XDG_RUNTIME_DIR/agentctl): locks and pid files. Private (0700).
    std::string runtime_dir;
    // Checks the recorded mounts of sandbox NAME again with the rules `create`
    // applied (the mountPolicy of `profiles`, the built-in deny list), from
    // their canonical paths: returns them unchanged, or throws agentctl::Error
    // when one is refused or no longer resolves to the recorded path. Providers
    // call it right before anything boots with those mounts (start, snapshot
    // restore). Empty in tests that do not exercise mounts.
    std::function<void(const std::string& name, const std::vector<std::string>& profiles,
                       const std::vector<Mount>& recorded)>
        recheck_mounts = {};
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
    ConfinementStatus confinement;                 // "verified (...)", "not verified: <why>", empty when not known
    std::vector<std::string> widenings;
    std::vector<std::pair<std::string, std::string>> extra;  // provider-specific key/values
};

struct ExecRequest {
    std::vector<std::string> argv;
    bool root = false;
    bool tty = false;  // interactive: hand the terminal to the backend's client
    std::map<std::string, std::string> env;
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

enum class LogKind { Network, Exec };

struct LogRequest {
    LogKind kind = LogKind::Network;
    bool follow = false;
    bool json = false;  // raw JSON Lines instead of a rendered table
};

struct SnapshotInfo {
    std::string name;
    std::string created_at;
    bool stateful = false;
};

class Provider {
public:
    virtual ~Provider() = default;

    [[nodiscard]] virtual std::string_view name() const = 0;

    // The backend's own name and version for `agentctl version` ("Incus 6.0.4").
    // Empty when the provider has no way to ask; throws agentctl::Error saying
    // why when the backend cannot be reached.
    [[nodiscard]] virtual std::string backend_version() { return {}; }

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

    // Runs a command as the sandbox user (or root) and returns its exit code.
    // Non-interactive output is written to the context's out/err streams.
    virtual int exec(const std::string& name, const ExecRequest& request) = 0;
    virtual int shell(const std::string& name, bool root) = 0;

    virtual void view(const std::string& name, bool read_only) = 0;
    virtual int logs(const std::string& name, const LogRequest& request) = 0;

    virtual void snapshot_create(const std::string& name, const std::string& snapshot) = 0;
    [[nodiscard]] virtual std::vector<SnapshotInfo> snapshot_list(const std::string& name) = 0;
    virtual void snapshot_restore(const std::string& name, const std::string& snapshot) = 0;
    virtual void snapshot_delete(const std::string& name, const std::string& snapshot) = 0;

    virtual void image_pull(const std::string& ref) = 0;
    virtual void image_build(const std::string& output, const std::string& base,
                             const std::vector<std::string>& packages) = 0;

    // Replaces a (possibly running) sandbox's network policy in place; used by
    // `policy add/remove`. MUST NOT restart the instance.
    virtual void apply_network_policy(const std::string& name, const policy::NetworkPolicy& network) = 0;
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
