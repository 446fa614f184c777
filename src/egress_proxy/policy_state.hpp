// The policy the proxy currently enforces, and how it is (re)loaded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentctl/policy.hpp"

namespace agentctl::egress_proxy {

// One immutable view of the policy. Connections hold a shared_ptr to the
// snapshot they were decided with; a reload swaps in a new one.
struct PolicySnapshot {
    policy::NetworkPolicy policy;
    bool usable = false;                            // false: the file was missing or malformed -> deny everything
    std::string problem;                            // why it is not usable, for the log
    std::vector<policy::IpAddress> host_addresses;  // this machine's own addresses (always refused)
    // When the next grant of the file ends (seconds since the epoch; 0: none
    // does): the proxy reloads then, and the rule is gone from `policy`.
    std::int64_t next_expiry = 0;
};

// Identity of the policy file as last seen, to notice replacement or edits.
struct FileStamp {
    bool exists = false;
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
    std::int64_t mtime_ns = 0;
    std::int64_t size = 0;
    friend bool operator==(const FileStamp&, const FileStamp&) = default;
};

[[nodiscard]] FileStamp stamp_of(const std::string& path);

// Reads and validates the policy file, keeping the rules in force now (grants
// that ended are left out). Never throws: any failure gives a
// snapshot with usable = false and the problem (file, and what is wrong).
[[nodiscard]] std::shared_ptr<const PolicySnapshot> load_policy_snapshot(const std::string& path);

}  // namespace agentctl::egress_proxy
