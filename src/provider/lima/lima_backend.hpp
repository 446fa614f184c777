// The lima provider's implementation class, shared by the files that
// implement its verbs (lima_backend_*.cpp). Not part of any public surface:
// the CLI reaches it only through lima_provider.hpp's factory.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agentctl/provider.hpp"
#include "provider/common/sandbox_secrets.hpp"
#include "provider/lima/guest_probe.hpp"
#include "provider/lima/lima_instance.hpp"
#include "provider/lima/lima_state.hpp"
#include "provider/lima/limactl_commands.hpp"
#include "provider/lima/proxy_process.hpp"

namespace agentctl::provider::lima {

// Lima has no snapshots agentctl builds on, no image store and no console
// bridge yet: those parts are missing, and the matrix says why.
class LimaBackend final : public Implements<Lifecycle, Commands, EgressLog, EgressPolicy> {
public:
    explicit LimaBackend(ProviderContext& context);

    [[nodiscard]] std::string_view name() const override { return "lima"; }
    [[nodiscard]] std::string backend_version() override;
    void create(const SandboxSpec& spec) override;
    void start(const std::string& name, const StartRequest& request) override;
    void stop(const std::string& name, const StopRequest& request) override;
    void remove(const std::string& name, bool force) override;
    [[nodiscard]] std::vector<InstanceInfo> list() override;
    [[nodiscard]] InstanceInfo status(const std::string& name) override;
    int exec(const std::string& name, const ExecRequest& request) override;
    int shell(const std::string& name, bool root) override;
    int logs(const std::string& name, const LogRequest& request) override;
    void apply_network_policy(const std::string& name, const policy::NetworkPolicy& network) override;
    std::vector<std::string> refresh_secret(const std::string& secret) override;

private:
    // ---- limactl
    // Runs (or, in preview, prints) argv; throws agentctl::Error quoting
    // limactl's stderr when it fails. `what` completes "cannot ...".
    ProcessResult run_limactl(const std::vector<std::string>& argv, const std::string& what,
                              std::map<std::string, std::string> env = {});
    void print_preview(const std::vector<std::string>& argv);
    // `limactl list NAME --json`; nullopt when Lima has no such instance.
    std::optional<LimaInstance> inspect(const std::string& name);

    // ---- state
    [[nodiscard]] LimaState require_state(const std::string& name) const;
    [[nodiscard]] ProxyPaths proxy_paths(const std::string& name) const;
    [[nodiscard]] std::vector<std::string> proxy_argv(const std::string& name, std::uint16_t port, bool secrets) const;
    // The secrets the sandbox uses (its record: names, placeholders, hosts; never a value).
    [[nodiscard]] std::vector<common::SandboxSecret> sandbox_secrets(const std::string& name) const;
    [[nodiscard]] std::set<std::uint16_t> ports_in_use_by_other_instances(const std::string& name) const;
    void write_policy(const std::string& name, const policy::NetworkPolicy& network);

    // ---- create pieces (lima_backend_create.cpp)
    void create_locked(const SandboxSpec& spec, const std::string& image, const std::vector<std::string>& expressions,
                       const ConfinementSettings& settings, bool confined);

    // ---- start pieces (lima_backend_start.cpp), in the order start runs them
    // Prints the commands a start would run, and the mounts it would expose.
    void preview_start(const LimaState& state, const std::string& expression, const std::vector<Mount>* mounts);
    // An instance that is already running: fine when agentctl's hostagent runs
    // it (says so), else throws (its egress is not confined).
    void report_already_running(const LimaState& state, const LimaInstance& instance);
    // Throws when launchd would start the instance by itself, or its SSH port is taken.
    void refuse_start_conflicts(const LimaState& state);
    // Applies `expression` and the requested mounts, then vets Lima's effective configuration.
    void configure(LimaState& state, const std::string& expression, const std::vector<Mount>* mounts);
    void refuse_unsafe_config(const LimaState& state, const LimaInstance& instance);
    // Boots confined (or unrestricted, for --no-network-policy) and reports the mounts and confinement.
    void boot(LimaState& state);
    void boot_unrestricted(LimaState& state);
    // The egress proxy, then `limactl start` under sandbox-exec with the proxy in its environment.
    struct ConfinedBoot {
        bool secrets = false;  // the proxy reads the sandbox's secrets on its stdin
        std::vector<std::string> proxy;
        std::vector<std::string> start;
        std::map<std::string, std::string> env;
    };
    [[nodiscard]] ConfinedBoot confined_boot(const LimaState& state) const;
    void print_confined_boot(const LimaState& state);
    // Starts the proxy, boots, and proves from inside that a direct connection
    // out is refused; returns the confinement line.
    std::string boot_confined(LimaState& state);
    Confinement check_confinement(const std::string& name, std::uint16_t ssh_port, std::uint16_t proxy_port);
    // The confinement check found a way out: stops the instance and its proxy, and throws.
    [[noreturn]] void halt_escaped(LimaState& state, const std::string& reason);
    // Stops the instance and its proxy, and throws `message` with `hint`.
    [[noreturn]] void halt(LimaState& state, const std::string& message, const std::string& hint);
    // The sandbox CA into the guest's trust store and the secrets' placeholders
    // (and the CA variables) into every session's environment, as root through
    // `limactl shell`; the script proves the CA is in the bundle. On failure
    // stops the instance and its proxy, and throws.
    void install_guest_secrets(LimaState& state);
    [[nodiscard]] std::vector<std::string> guest_secrets_argv(const std::string& name, bool preview) const;
    void install_agent(LimaState& state);

    ProviderContext& m_ctx;
    std::string m_home;       // $HOME
    std::string m_lima_home;  // $LIMA_HOME or ~/.lima
};

}  // namespace agentctl::provider::lima
