// A netlink socket that asks the kernel one request at a time (Linux only):
// it sends the request and reads the replies of its sequence number. What a
// request says and what its replies hold is the caller's to build and read.
#pragma once

#if defined(__linux__)

#include <linux/netlink.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/unique_fd.hpp"

namespace agentctl::core {

// How the replies to one request ended.
struct NetlinkOutcome {
    // Every reply was read: the dump's NLMSG_DONE, the acknowledgement, the
    // single reply or an error came. False when the socket is not open, the
    // request could not be sent, a receive failed or timed out, or a reply
    // was cut short.
    bool complete = false;
    // The errno the kernel answered with (positive), 0 when it answered none.
    int error = 0;
    // A reply was marked NLM_F_DUMP_INTR: what the dump lists changed while
    // it was read, so objects may be missing or listed twice.
    bool interrupted = false;
};

class NetlinkSocket {
public:
    // One reply: its header, in the socket's buffer until the call returns,
    // and the bytes after the header.
    using OnReply = std::function<void(const nlmsghdr& header, std::string_view payload)>;

    // A socket of netlink family `protocol` (NETLINK_ROUTE, NETLINK_NETFILTER)
    // bound to a port of its own. A receive fails after waiting
    // `receive_timeout`; zero waits as long as it takes.
    explicit NetlinkSocket(int protocol, std::chrono::seconds receive_timeout = std::chrono::seconds::zero());

    // False when the socket could not be made or bound: every exchange fails.
    [[nodiscard]] bool is_open() const { return m_fd.get() >= 0; }

    // Sends a request of `type` with `flags` (NLM_F_DUMP, NLM_F_ACK or none;
    // NLM_F_REQUEST is added) and `payload` after the header, and hands each
    // reply of its sequence number to `on_reply` until they end: a dump's at
    // NLMSG_DONE, those of a request with NLM_F_ACK at the acknowledgement,
    // any other request's at its first reply; an error ends them all. Neither
    // NLMSG_DONE nor NLMSG_ERROR is handed on. Replies left unread from an
    // earlier request are skipped. An interrupted dump is read to its end.
    NetlinkOutcome exchange(std::uint16_t type, std::uint16_t flags, std::string_view payload, const OnReply& on_reply);

private:
    UniqueFd m_fd;
    std::uint32_t m_sequence = 0;
    std::string m_request;
    std::unique_ptr<char[]> m_buffer;
};

}  // namespace agentctl::core

#endif
