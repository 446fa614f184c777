// The effective-configuration check `agentctl start` runs before every boot.
//
// Pure: it compares what Lima will actually do (the `config` of `limactl list
// NAME --json`, which already has ~/.lima/_config/default.yaml and
// override.yaml merged in) with what agentctl configured, and returns one
// refusal per way around the sandbox, each with its own message.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agentctl/sandbox.hpp"
#include "provider/lima/lima_instance.hpp"
#include "provider/lima/limactl_commands.hpp"

namespace agentctl::provider::lima {

enum class RefusalKind {
    ConfigUnknown,
    VmType,
    ExtraMount,
    MountHostChanged,
    MountMadeWritable,
    StateDirWritable,
    ForwardAgent,
    ForwardX11,
    ReverseForward,
    CopyToHost,
    ExtraNetwork,
    SshPortChanged,
    ProxyEnvChanged,
    HostResolverOn,
    Autostart,
    RunningNotStartedByAgentctl,
};

struct Refusal {
    RefusalKind kind;
    std::string message;  // one sentence naming the setting and its value
};

// The docs section every refusal points to.
inline constexpr const char* k_troubleshooting = "see Troubleshooting in docs/setup-lima.md";

struct ExpectedConfig {
    std::vector<Mount> mounts;  // the sandbox's own mount set (state.json)
    std::string state_dir;      // agentctl's config dir, canonical
    ConfinementSettings settings;
    bool confined = true;  // false: --no-network-policy (only mount/forward checks apply)
};

// Every refusal, in a fixed order (VM type, mounts, forwarding, host sockets,
// copies, networks, SSH port, proxy environment, resolver). Mount paths are
// compared after lexical normalisation; callers pass canonical host paths.
// An instance without an effective configuration ("config": null) gets one
// refusal, ConfigUnknown, and nothing else is judged.
[[nodiscard]] std::vector<Refusal> check_effective_config(const LimaInstance& instance, const ExpectedConfig& expected);

// The launchd registrations `limactl autostart enable` creates
// (lima-vm/lima pkg/autostart/launchd/launchd.go): a LaunchAgent at
// ~/Library/LaunchAgents/io.lima-vm.autostart.NAME.plist (condition login) and
// a LaunchDaemon at /Library/LaunchDaemons/io.lima-vm.daemon.NAME.plist
// (condition boot). Returns the paths that exist.
[[nodiscard]] std::vector<std::string> autostart_registrations(const std::string& home, const std::string& system_root,
                                                               const std::string& name,
                                                               const std::function<bool(const std::string&)>& exists);

// Renders refusals as one error message (one line each) for agentctl::Error.
[[nodiscard]] std::string render_refusals(const std::string& name, const std::vector<Refusal>& refusals);

}  // namespace agentctl::provider::lima
