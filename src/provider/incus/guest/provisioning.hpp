// What the provider needs from the policy module's package catalog and
// presets, in the shape it uses them (the agent table: common/agent_install.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace agentctl::provider::incus {

// Neutral package names mapped to `manager`'s own names (apt | dnf | apk).
[[nodiscard]] std::vector<std::string> guest_package_names(const std::vector<std::string>& neutral,
                                                           const std::string& manager);

// The allow entries `image build` opens so the base can reach its package
// sources (the apt and apk presets).
[[nodiscard]] std::vector<std::string> package_source_entries();

}  // namespace agentctl::provider::incus
