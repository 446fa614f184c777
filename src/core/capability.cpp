#include "agentctl/capability.hpp"

#include <algorithm>

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

CapabilityMatrix& CapabilityMatrix::set(std::string_view feature, CapabilityStatus status, std::string message) {
    m_entries[std::string(feature)] = Capability{status, std::move(message)};
    return *this;
}

Capability CapabilityMatrix::get(std::string_view feature) const {
    if (auto it = m_entries.find(feature); it != m_entries.end()) return it->second;
    return Capability{CapabilityStatus::NotAvailable, "this provider does not declare the feature"};
}

}  // namespace agentctl
