// The capability model: per provider, what each feature's status is.
//
// Every command checks its feature first (the "gate"): NotAvailable and
// UnderDevelopment stop with exit 2, ManualWorkaround prints the plan and stops
// with exit 3 unless --force-partial is given.
#pragma once

#include <array>
#include <cstddef>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace agentctl {

enum class CapabilityStatus { Supported, NotAvailable, UnderDevelopment, ManualWorkaround };

[[nodiscard]] std::string_view to_string(CapabilityStatus status);

namespace detail {
// Every feature name, in the order they are shown. The only list of them.
inline constexpr std::string_view k_feature_names[] = {
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
    "placement.target",
};

constexpr bool is_feature_name(std::string_view name) {
    for (auto known : k_feature_names) {
        if (known == name) return true;
    }
    return false;
}
}  // namespace detail

// A feature of the capability model. A name written in the source is checked
// when agentctl is compiled: `gate("fs.mnt")` does not build, so a typo can
// never silently read as NotAvailable.
class Feature {
public:
    consteval Feature(const char* name) : m_name(name) {  // NOLINT(google-explicit-constructor): literals only
        if (!detail::is_feature_name(m_name)) {
            throw "not a capability feature: add it to detail::k_feature_names or fix the spelling";
        }
    }

    [[nodiscard]] constexpr std::string_view name() const { return m_name; }
    constexpr operator std::string_view() const { return m_name; }  // NOLINT(google-explicit-constructor)
    friend constexpr bool operator==(Feature, Feature) = default;

private:
    template <std::size_t... I>
    friend constexpr std::array<Feature, sizeof...(I)> make_features(std::index_sequence<I...>);
    struct FromTable {};
    constexpr Feature(FromTable, std::string_view name) : m_name(name) {}

    std::string_view m_name;
};

std::ostream& operator<<(std::ostream& out, Feature feature);

template <std::size_t... I>
constexpr std::array<Feature, sizeof...(I)> make_features(std::index_sequence<I...>) {
    return {Feature(Feature::FromTable{}, detail::k_feature_names[I])...};
}

// Every feature, in the order they are shown.
inline constexpr auto k_features = make_features(std::make_index_sequence<std::size(detail::k_feature_names)>{});

struct Capability {
    CapabilityStatus status = CapabilityStatus::Supported;
    // Why it is not supported (NotAvailable/UnderDevelopment), or the manual
    // plan (ManualWorkaround). Empty for Supported.
    std::string message;
};

class CapabilityMatrix {
public:
    CapabilityMatrix() = default;

    CapabilityMatrix& set(Feature feature, CapabilityStatus status, std::string message = {});
    // A feature the provider does not declare is reported as NotAvailable.
    [[nodiscard]] Capability get(Feature feature) const;
    [[nodiscard]] const std::map<std::string, Capability, std::less<>>& entries() const { return m_entries; }

private:
    std::map<std::string, Capability, std::less<>> m_entries;
};

}  // namespace agentctl
