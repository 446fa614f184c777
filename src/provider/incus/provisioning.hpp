// What the provider needs from the policy module's agent table and package
// catalog, in the shape it uses them.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace agentctl::provider::incus {

// The shell command that installs agent `name`, run as the sandbox user;
// throws agentctl::Error for an unknown agent.
[[nodiscard]] std::string agent_install_command(const std::string& name);

// Neutral package names mapped to `manager`'s own names (apt | dnf | apk).
[[nodiscard]] std::vector<std::string> guest_package_names(const std::vector<std::string>& neutral,
                                                           const std::string& manager);

// The allow entries `image build` opens so the base can reach its package
// sources (the apt and apk presets).
[[nodiscard]] std::vector<std::string> package_source_entries();

}  // namespace agentctl::provider::incus
