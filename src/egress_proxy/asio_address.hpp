// policy::IpAddress to and from Asio's address types: the one conversion the
// proxy uses wherever an address crosses between the policy and a socket; and
// how an endpoint is written in its messages and log lines.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

#include "agentctl/policy.hpp"

namespace agentctl::egress_proxy {

[[nodiscard]] inline boost::asio::ip::tcp::endpoint to_endpoint(const policy::IpAddress& address, std::uint16_t port) {
    if (!address.v6) {
        boost::asio::ip::address_v4::bytes_type bytes{};
        std::copy_n(address.bytes.begin(), 4, bytes.begin());
        return {boost::asio::ip::address_v4(bytes), port};
    }
    boost::asio::ip::address_v6::bytes_type bytes{};
    std::copy_n(address.bytes.begin(), 16, bytes.begin());
    return {boost::asio::ip::address_v6(bytes), port};
}

// A v6 address's scope id plays no part: the bytes are the address.
[[nodiscard]] inline policy::IpAddress from_asio(const boost::asio::ip::address& address) {
    policy::IpAddress out;
    if (address.is_v4()) {
        auto bytes = address.to_v4().to_bytes();
        std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
    } else {
        out.v6 = true;
        auto bytes = address.to_v6().to_bytes();
        std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
    }
    return out;
}

// ADDRESS:PORT, with a v6 address in brackets ([::1]:3128).
[[nodiscard]] inline std::string endpoint_text(const boost::asio::ip::tcp::endpoint& endpoint) {
    const auto address = endpoint.address().to_string();
    const auto port = std::to_string(endpoint.port());
    return endpoint.address().is_v6() ? "[" + address + "]:" + port : address + ":" + port;
}

}  // namespace agentctl::egress_proxy
