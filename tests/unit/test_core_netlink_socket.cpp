// Requests to this machine's rtnetlink (links: no root needed), and where the
// replies to each end.
#include <catch2/catch.hpp>

#if defined(__linux__)

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/netlink_socket.hpp"

using agentctl::core::NetlinkSocket;

namespace {

// An RTM_GETLINK request's payload: the link `index`, or every link (0).
std::string_view link_request(ifinfomsg& message, int index) {
    message = {};
    message.ifi_family = AF_UNSPEC;
    message.ifi_index = index;
    return {reinterpret_cast<const char*>(&message), sizeof message};
}

// The links the replies name, or 0 for a reply that is no link.
struct Links {
    std::vector<int> indexes;
    NetlinkSocket::OnReply collect() {
        return [this](const nlmsghdr& header, std::string_view payload) {
            ifinfomsg link{};
            if (header.nlmsg_type != RTM_NEWLINK || payload.size() < sizeof link) {
                indexes.push_back(0);
                return;
            }
            std::memcpy(&link, payload.data(), sizeof link);
            indexes.push_back(link.ifi_index);
        };
    }
};

constexpr int k_no_such_link = 0x7fffffff;

}  // namespace

TEST_CASE("a netlink dump hands on every reply up to NLMSG_DONE", "[netlink]") {
    NetlinkSocket socket(NETLINK_ROUTE, std::chrono::seconds(5));
    REQUIRE(socket.is_open());
    ifinfomsg message{};
    Links links;
    const auto outcome = socket.exchange(RTM_GETLINK, NLM_F_DUMP, link_request(message, 0), links.collect());
    CHECK(outcome.complete);
    CHECK(outcome.error == 0);
    CHECK(std::count(links.indexes.begin(), links.indexes.end(), 1) == 1);  // loopback
    CHECK(std::count(links.indexes.begin(), links.indexes.end(), 0) == 0);
}

TEST_CASE("a netlink request ends at its one reply, with NLM_F_ACK at the acknowledgement, or at an error",
          "[netlink]") {
    struct Case {
        int index;
        std::vector<int> replies;
        int error;
    };
    NetlinkSocket socket(NETLINK_ROUTE, std::chrono::seconds(5));
    ifinfomsg message{};
    // Loopback, then a link there is none of, then loopback again on the
    // same socket: each request's replies are its own.
    for (const auto& [index, replies, error] : {Case{1, {1}, 0}, Case{k_no_such_link, {}, ENODEV}, Case{1, {1}, 0}}) {
        for (const std::uint16_t flags : {0, NLM_F_ACK}) {
            INFO("link " << index << ", flags " << flags);
            Links links;
            const auto outcome = socket.exchange(RTM_GETLINK, flags, link_request(message, index), links.collect());
            CHECK(outcome.complete);
            CHECK(outcome.error == error);
            CHECK_FALSE(outcome.interrupted);
            CHECK(links.indexes == replies);
        }
    }
}

TEST_CASE("a netlink socket that could not be made asks nothing", "[netlink]") {
    NetlinkSocket socket(MAX_LINKS);  // no such netlink family
    CHECK_FALSE(socket.is_open());
    ifinfomsg message{};
    Links links;
    const auto outcome = socket.exchange(RTM_GETLINK, NLM_F_DUMP, link_request(message, 0), links.collect());
    CHECK_FALSE(outcome.complete);
    CHECK(links.indexes.empty());
}

#endif
