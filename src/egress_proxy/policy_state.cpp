#include "egress_proxy/policy_state.hpp"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include <nlohmann/json.hpp>

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
    snapshot->host_addresses = host_own_addresses();
    try {
        auto text = core::read_file_if_exists(path);
        if (!text) {
            snapshot->problem = "policy file " + path + " does not exist";
            return snapshot;
        }
        auto document = nlohmann::json::parse(*text, nullptr, false);
        if (document.is_discarded()) {
            snapshot->problem = "policy file " + path + " is not valid JSON";
            return snapshot;
        }
        snapshot->policy = policy::from_policy_file(document);
        snapshot->usable = true;
    } catch (const std::exception& e) {
        snapshot->problem = "policy file " + path + ": " + e.what();
    }
    return snapshot;
}

std::vector<policy::IpAddress> host_own_addresses() {
    std::vector<policy::IpAddress> out;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return out;
    for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
        if (it->ifa_addr == nullptr) continue;
        policy::IpAddress address;
        if (it->ifa_addr->sa_family == AF_INET) {
            sockaddr_in in4{};
            std::memcpy(&in4, it->ifa_addr, sizeof in4);
            std::memcpy(address.bytes.data(), &in4.sin_addr, 4);
        } else if (it->ifa_addr->sa_family == AF_INET6) {
            sockaddr_in6 in6{};
            std::memcpy(&in6, it->ifa_addr, sizeof in6);
            address.v6 = true;
            std::memcpy(address.bytes.data(), &in6.sin6_addr, 16);
        } else {
            continue;
        }
        if (std::find(out.begin(), out.end(), address) == out.end()) out.push_back(address);
    }
    ::freeifaddrs(list);
    return out;
}

}  // namespace agentctl::egress_proxy
