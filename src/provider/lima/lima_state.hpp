// What agentctl records about one Lima instance (lima/NAME/state.json).
//
// Written atomically under the instance's lock. A state file that cannot be
// parsed is an error naming the file and field, never silently replaced.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agentctl/confinement.hpp"
#include "agentctl/sandbox.hpp"

namespace agentctl::provider::lima {

struct LimaState {
    std::string name;
    std::string image;
    std::vector<std::string> profiles;
    std::string created_at;  // RFC 3339
    std::string user = "agent";
    bool unrestricted = false;  // --no-network-policy, fixed at create
    bool dns_disabled = false;  // profile network.dns.disabled: host resolver off
    std::string agent;          // --agent requested ("" = none)
    bool agent_installed = false;
    // The sandbox CA and the secrets' placeholders reached the guest (set by
    // the first start that installed them; a sandbox without secrets: false).
    bool secrets_installed = false;
    std::uint16_t ssh_port = 0;     // pinned ssh.localPort (49152-65535)
    std::uint16_t proxy_port = 0;   // pinned egress proxy port (49152-65535)
    int hostagent_pid = 0;          // the hostagent agentctl started; 0 when stopped
    ConfinementStatus confinement;  // "verified: ...", "not verified: ...", empty when unknown
    std::vector<Mount> mounts;      // the sticky mount set agentctl applied
    std::vector<PortForward> ports;
};

// Serialises / parses state.json. `path` is only used in error messages.
[[nodiscard]] std::string state_to_json(const LimaState& state);
[[nodiscard]] LimaState state_from_json(const std::string& text, const std::string& path);

// nullopt when the instance has no state file (agentctl did not create it).
[[nodiscard]] std::optional<LimaState> load_state(const std::string& state_dir, const std::string& name);
void save_state(const std::string& state_dir, const LimaState& state);

}  // namespace agentctl::provider::lima
