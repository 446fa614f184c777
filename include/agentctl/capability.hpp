// The capability model: per provider, what each feature's status is.
//
// Every command checks its feature first (the "gate"): NotAvailable and
// UnderDevelopment stop with exit 2, ManualWorkaround prints the plan and stops
// with exit 3 unless --force-partial is given.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "agentctl/error.hpp"

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
    "network.credentials",
    "gc",
    "pool",
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

// What a provider can do, feature by feature. Built over the features the
// provider has code for (the parts it implements, provider.hpp): those start
// Supported, every other feature starts NotAvailable; the provider then states
// what differs (a platform it cannot confine on, work under development, a
// manual plan).
class CapabilityMatrix {
public:
    explicit CapabilityMatrix(std::initializer_list<std::span<const Feature>> parts);

    // Throws std::logic_error when `status` is Supported or ManualWorkaround
    // for a feature the provider has no code for: the CLI would call nothing.
    CapabilityMatrix& set(Feature feature, CapabilityStatus status, std::string message = {});
    [[nodiscard]] Capability get(Feature feature) const;
    // Whether the provider has code for `feature` (a preview may show its plan).
    [[nodiscard]] bool implemented(Feature feature) const;
    [[nodiscard]] const std::map<std::string, Capability, std::less<>>& entries() const { return m_entries; }

private:
    std::map<std::string, Capability, std::less<>> m_entries;
    std::set<std::string, std::less<>> m_implemented;
};

// The error for `feature` of `provider` when the gate stops there
// (NotAvailable, UnderDevelopment: exit 2; ManualWorkaround: exit 3), one
// wording for the gate and for a provider that refuses a call itself.
// `capability` must not be Supported.
[[nodiscard]] Error refusal(std::string_view provider, Feature feature, const Capability& capability);

}  // namespace agentctl
