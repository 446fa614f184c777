#include "agentctl/capability.hpp"

#include <ostream>
#include <stdexcept>

#include <fmt/format.h>

namespace agentctl {

std::string_view to_string(CapabilityStatus status) {
    switch (status) {
        case CapabilityStatus::Supported: return "Supported";
        case CapabilityStatus::NotAvailable: return "NotAvailable";
        case CapabilityStatus::UnderDevelopment: return "UnderDevelopment";
        case CapabilityStatus::ManualWorkaround: return "ManualWorkaround";
    }
    return "Unknown";
}

std::ostream& operator<<(std::ostream& out, Feature feature) { return out << feature.name(); }

CapabilityMatrix::CapabilityMatrix(std::initializer_list<std::span<const Feature>> parts) {
    for (auto part : parts) {
        for (auto feature : part) m_implemented.emplace(feature.name());
    }
    for (auto feature : k_features) {
        m_entries[std::string(feature.name())] =
            implemented(feature) ? Capability{}
                                 : Capability{CapabilityStatus::NotAvailable, "this provider does not implement it"};
    }
}

CapabilityMatrix& CapabilityMatrix::set(Feature feature, CapabilityStatus status, std::string message) {
    if ((status == CapabilityStatus::Supported || status == CapabilityStatus::ManualWorkaround) &&
        !implemented(feature)) {
        throw std::logic_error(
            fmt::format("{} cannot be {}: the provider has no code for it", feature.name(), to_string(status)));
    }
    m_entries[std::string(feature.name())] = Capability{status, std::move(message)};
    return *this;
}

Capability CapabilityMatrix::get(Feature feature) const {
    if (auto it = m_entries.find(feature.name()); it != m_entries.end()) return it->second;
    return Capability{CapabilityStatus::NotAvailable, "this provider does not implement it"};
}

bool CapabilityMatrix::implemented(Feature feature) const { return m_implemented.contains(feature.name()); }

Error refusal(std::string_view provider, Feature feature, const Capability& capability) {
    const auto hint = fmt::format("run `agentctl capabilities --provider {}` to see what it supports", provider);
    switch (capability.status) {
        case CapabilityStatus::NotAvailable:
            return Error(
                fmt::format("{} is not available on the {} provider: {}", feature.name(), provider, capability.message),
                hint, exit_code::k_not_available);
        case CapabilityStatus::UnderDevelopment:
            return Error(fmt::format("{} is under development on the {} provider: {}", feature.name(), provider,
                                     capability.message),
                         hint, exit_code::k_not_available);
        case CapabilityStatus::ManualWorkaround:
            return Error(fmt::format("{} on the {} provider needs manual steps: {}", feature.name(), provider,
                                     capability.message),
                         "do those steps yourself, then re-run with --force-partial", exit_code::k_manual_workaround);
        case CapabilityStatus::Supported: break;
    }
    throw std::logic_error(
        fmt::format("{} is Supported on the {} provider: nothing to refuse", feature.name(), provider));
}

}  // namespace agentctl
