// Adapts the policy module's tables (package catalog, presets) to the
// shapes the provider uses.
#include "provider/incus/guest/provisioning.hpp"

#include "policy/catalog.hpp"

namespace agentctl::provider::incus {

std::vector<std::string> guest_package_names(const std::vector<std::string>& neutral, const std::string& manager) {
    const auto pm = manager == "dnf"   ? policy::PackageManager::Dnf
                    : manager == "apk" ? policy::PackageManager::Apk
                                       : policy::PackageManager::Apt;
    std::vector<std::string> names;
    for (const auto& n : neutral) {
        policy::check_package_name(n);
        for (auto& mapped : policy::package_names_for(n, pm)) names.push_back(std::move(mapped));
    }
    return names;
}

std::vector<std::string> package_source_entries() {
    std::vector<std::string> entries;
    for (const char* preset : {"apt", "apk"}) {
        for (const auto& rule : policy::expand_preset(preset)) entries.push_back(rule.entry());
    }
    return entries;
}

}  // namespace agentctl::provider::incus
