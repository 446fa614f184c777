// The capability model: per provider, what each feature's status is.
//
// Every command checks its feature first (the "gate"): NotAvailable and
// UnderDevelopment stop with exit 2, ManualWorkaround prints the plan and stops
// with exit 3 unless --force-partial is given.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

enum class CapabilityStatus { Supported, NotAvailable, UnderDevelopment, ManualWorkaround };

[[nodiscard]] std::string_view to_string(CapabilityStatus status);

// Every feature name, in the order they are shown.
inline constexpr std::string_view k_features[] = {
    "create",
    "start",
    "stop",
    "delete",
    "list",
    "status",
    "exec",
    "shell",
    "view",
    "snapshot.create",
    "snapshot.list",
    "snapshot.restore",
    "snapshot.delete",
    "network.acl",
    "network.deny-lan",
    "network.port-publish",
    "fs.mount",
    "fs.mount.readonly",
    "image.pull",
    "image.build",
    "logs.network",
    "logs.exec",
    "provision.packages",
};

struct Capability {
    CapabilityStatus status = CapabilityStatus::Supported;
    // Why it is not supported (NotAvailable/UnderDevelopment), or the manual
    // plan (ManualWorkaround). Empty for Supported.
    std::string message;
};

class CapabilityMatrix {
public:
    CapabilityMatrix() = default;

    // Sets one feature; the feature must be one of k_features.
    CapabilityMatrix& set(std::string_view feature, CapabilityStatus status, std::string message = {});
    // Unknown features are reported as NotAvailable.
    [[nodiscard]] Capability get(std::string_view feature) const;
    [[nodiscard]] const std::map<std::string, Capability, std::less<>>& entries() const { return m_entries; }

private:
    std::map<std::string, Capability, std::less<>> m_entries;
};

}  // namespace agentctl
