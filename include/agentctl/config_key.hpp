// One key of agentctl's configuration, as a table row: core declares the
// generic keys (core/config.hpp), each provider its own in its registry entry
// (provider.hpp), and the registry joins them into the one table `config`
// reads, writes and lists.
#pragma once

#include <string>
#include <string_view>

namespace agentctl {

enum class KeyPolicy {
    UserMayOverride,  // the user's file wins over the organisation's
    OrgLocks,         // once the organisation's file sets it, the user's file may not
    OrgOnly,          // only the organisation's file may set it
};

struct ConfigKey {
    std::string_view name;
    std::string_view description;
    std::string_view default_value;  // empty: unset
    KeyPolicy policy;
    // Returns an error sentence for a bad value, or empty when the value is fine.
    std::string (*validate)(std::string_view value);
};

}  // namespace agentctl
