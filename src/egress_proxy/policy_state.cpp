#include "egress_proxy/policy_state.hpp"

#include <sys/stat.h>

#include <chrono>
#include <exception>

#include "agentctl/host_network.hpp"
#include "core/files.hpp"

namespace agentctl::egress_proxy {

FileStamp stamp_of(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {};
    FileStamp stamp;
    stamp.exists = true;
    stamp.device = static_cast<std::uint64_t>(st.st_dev);
    stamp.inode = static_cast<std::uint64_t>(st.st_ino);
    stamp.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    stamp.size = static_cast<std::int64_t>(st.st_size);
    return stamp;
}

std::shared_ptr<const PolicySnapshot> load_policy_snapshot(const std::string& path) {
    auto snapshot = std::make_shared<PolicySnapshot>();
    snapshot->host_addresses = policy::host_own_addresses();
    try {
        auto text = core::read_file_if_exists(path);
        if (!text) {
            snapshot->problem = "policy file " + path + " does not exist";
            return snapshot;
        }
        const auto now =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        auto policy = policy::from_policy_file_text(*text);
        snapshot->next_expiry = policy::next_expiry(policy, now);
        snapshot->policy = policy::in_force_at(std::move(policy), now);
        snapshot->usable = true;
    } catch (const std::exception& e) {
        snapshot->problem = "policy file " + path + ": " + e.what();
    }
    return snapshot;
}

}  // namespace agentctl::egress_proxy
