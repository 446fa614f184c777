#include "agentctl/capability.hpp"

#include <ostream>

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

CapabilityMatrix& CapabilityMatrix::set(Feature feature, CapabilityStatus status, std::string message) {
    m_entries[std::string(feature.name())] = Capability{status, std::move(message)};
    return *this;
}

Capability CapabilityMatrix::get(Feature feature) const {
    if (auto it = m_entries.find(feature.name()); it != m_entries.end()) return it->second;
    return Capability{CapabilityStatus::NotAvailable, "this provider does not declare the feature"};
}

}  // namespace agentctl
