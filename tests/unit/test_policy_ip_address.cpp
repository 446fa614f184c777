// IP literal parsing in every spelling, canonical text, and classification.
#include <catch2/catch.hpp>

#include "agentctl/policy.hpp"

using namespace agentctl::policy;

namespace {

std::string canon(std::string_view text) {
    auto ip = parse_ip_literal(text);
    return ip ? ip->to_string() : std::string("<not an ip>");
}

AddressClass class_of(std::string_view text) {
    auto ip = parse_ip_literal(text);
    REQUIRE(ip.has_value());
    return classify(*ip);
}

}  // namespace

TEST_CASE("every inet_aton spelling of 127.0.0.1 means 127.0.0.1", "[ip]") {
    for (const char* spelling :
         {"127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "127.1", "127.0.1", "0x7f000001", "0x7F.0.0.1",
          "017700000001", "127.0.0.1.", "0x7f.0x0.0x0.0x1", "[::ffff:7f00:1]", "::ffff:7f00:1", "::ffff:127.0.0.1"}) {
        INFO(spelling);
        auto ip = parse_ip_literal(spelling);
        REQUIRE(ip.has_value());
        CHECK(classify(*ip) == AddressClass::Loopback);
    }
    CHECK(canon("2130706433") == "127.0.0.1");
    CHECK(canon("0x7f.1") == "127.0.0.1");
    CHECK(canon("0177.0.0.1") == "127.0.0.1");
    CHECK(canon("127.1") == "127.0.0.1");
    CHECK(canon("10.1.258") == "10.1.1.2");
    CHECK(canon("0x") == "0.0.0.0");
    CHECK(canon("::ffff:7f00:1") == "::ffff:127.0.0.1");
}

TEST_CASE("strings that are not IP literals are left to host-name rules", "[ip]") {
    for (const char* text : {"",
                             ".",
                             "example.com",
                             "1.2.3.4.5",
                             "256.1.1.1",
                             "1.256.1.1",
                             "1.2.65536",
                             "09",
                             "0x1g",
                             "4294967296",
                             "99999999999999999999999",
                             "1..2",
                             ".1.2",
                             "1.2.3.4..",
                             "[1.2.3.4]",
                             "[::1",
                             "::1]",
                             ":::",
                             "1:2:3:4:5:6:7:8:9",
                             "fe80::1%",
                             "fe80::1%a b",
                             "-1",
                             "+1",
                             " 1.2.3.4"}) {
        INFO(text);
        CHECK_FALSE(parse_ip_literal(text).has_value());
    }
}

TEST_CASE("IPv6 text is canonical per RFC 5952", "[ip]") {
    CHECK(canon("2001:0DB8:0000:0000:0000:0000:0000:0001") == "2001:db8::1");
    CHECK(canon("[2606:4700::1111]") == "2606:4700::1111");
    CHECK(canon("2001:db8:0:1:1:1:1:1") == "2001:db8:0:1:1:1:1:1");
    CHECK(canon("fe80::1%eth0") == "fe80::1");
    CHECK(canon("::") == "::");
    CHECK(canon("::1") == "::1");
}

TEST_CASE("IPv4 ranges are classified", "[ip]") {
    CHECK(class_of("0.0.0.0") == AddressClass::Unspecified);
    CHECK(class_of("0.1.2.3") == AddressClass::Unspecified);
    CHECK(class_of("127.255.0.9") == AddressClass::Loopback);
    CHECK(class_of("10.0.0.1") == AddressClass::Lan);
    CHECK(class_of("172.16.0.1") == AddressClass::Lan);
    CHECK(class_of("172.31.255.255") == AddressClass::Lan);
    CHECK(class_of("172.32.0.1") == AddressClass::Public);
    CHECK(class_of("172.15.0.1") == AddressClass::Public);
    CHECK(class_of("192.168.1.1") == AddressClass::Lan);
    CHECK(class_of("169.254.169.254") == AddressClass::Lan);
    CHECK(class_of("100.64.0.1") == AddressClass::Lan);
    CHECK(class_of("100.127.255.255") == AddressClass::Lan);
    CHECK(class_of("100.128.0.1") == AddressClass::Public);
    CHECK(class_of("224.0.0.1") == AddressClass::Multicast);
    CHECK(class_of("239.255.255.250") == AddressClass::Multicast);
    CHECK(class_of("240.0.0.1") == AddressClass::Reserved);
    CHECK(class_of("255.255.255.254") == AddressClass::Reserved);
    CHECK(class_of("255.255.255.255") == AddressClass::Broadcast);
    CHECK(class_of("192.0.2.1") == AddressClass::Reserved);
    CHECK(class_of("198.18.0.1") == AddressClass::Reserved);
    CHECK(class_of("203.0.113.7") == AddressClass::Reserved);
    CHECK(class_of("93.184.216.34") == AddressClass::Public);
    CHECK(class_of("1.1.1.1") == AddressClass::Public);
}

TEST_CASE("IPv6 ranges are classified", "[ip]") {
    CHECK(class_of("::") == AddressClass::Unspecified);
    CHECK(class_of("::1") == AddressClass::Loopback);
    CHECK(class_of("ff02::1") == AddressClass::Multicast);
    CHECK(class_of("fd00::1") == AddressClass::Lan);
    CHECK(class_of("fc12::1") == AddressClass::Lan);
    CHECK(class_of("fe80::1") == AddressClass::Lan);
    CHECK(class_of("febf::1") == AddressClass::Lan);
    CHECK(class_of("fec0::1") == AddressClass::Lan);
    CHECK(class_of("2001:db8::1") == AddressClass::Reserved);
    CHECK(class_of("100::1") == AddressClass::Reserved);
    CHECK(class_of("4000::1") == AddressClass::Reserved);
    CHECK(class_of("2606:4700:4700::1111") == AddressClass::Public);
    CHECK(class_of("2a00:1450:4001::1") == AddressClass::Public);
}

TEST_CASE("addresses that embed IPv4 are judged by the embedded address", "[ip]") {
    // v4-mapped and v4-compatible
    CHECK(class_of("::ffff:10.0.0.1") == AddressClass::Lan);
    CHECK(class_of("::ffff:8.8.8.8") == AddressClass::Public);
    CHECK(class_of("::127.0.0.1") == AddressClass::Loopback);
    CHECK(class_of("::192.168.0.1") == AddressClass::Lan);
    // NAT64 well-known prefix
    CHECK(class_of("64:ff9b::7f00:1") == AddressClass::Loopback);
    CHECK(class_of("64:ff9b::192.168.1.1") == AddressClass::Lan);
    CHECK(class_of("64:ff9b::8.8.8.8") == AddressClass::Public);
    // Local-use NAT64: the /96 form is judged, any other placement refused
    CHECK(class_of("64:ff9b:1::a00:1") == AddressClass::Lan);
    CHECK(class_of("64:ff9b:1::808:808") == AddressClass::Public);
    CHECK(class_of("64:ff9b:1:808:8:800::") == AddressClass::Reserved);
    // 6to4
    CHECK(class_of("2002:7f00:1::1") == AddressClass::Loopback);
    CHECK(class_of("2002:c0a8:101::1") == AddressClass::Lan);
    CHECK(class_of("2002:808:808::1") == AddressClass::Public);
    // Teredo: client = inverted last 32 bits. ~127.0.0.1 = 80ff:fffe.
    CHECK(class_of("2001:0:808:808:0:0:80ff:fffe") == AddressClass::Loopback);
    // ~10.0.0.1 = f5ff:fffe
    CHECK(class_of("2001:0:808:808::f5ff:fffe") == AddressClass::Lan);
    // server inside the LAN, client public (~8.8.8.8 = f7f7:f7f7)
    CHECK(class_of("2001:0:a00:1::f7f7:f7f7") == AddressClass::Lan);
    CHECK(class_of("2001:0:808:808::f7f7:f7f7") == AddressClass::Public);
}

TEST_CASE("AddressClass names", "[ip]") {
    CHECK(to_string(AddressClass::Lan) == "lan");
    CHECK(to_string(AddressClass::Loopback) == "loopback");
    CHECK(to_string(AddressClass::Public) == "public");
}

TEST_CASE("the first and the last address of each range in k_lan_ranges are LAN", "[ip]") {
    for (auto text : k_lan_ranges) {
        INFO(text);
        const auto slash = text.find('/');
        const auto base = *parse_ip_literal(text.substr(0, slash));
        const int prefix = std::stoi(std::string(text.substr(slash + 1)));
        IpAddress first = base, last = base;
        const int width = base.v6 ? 128 : 32;
        for (int bit = prefix; bit < width; ++bit) last.bytes[bit / 8] |= static_cast<std::uint8_t>(0x80 >> (bit % 8));
        CHECK(classify(first) == AddressClass::Lan);
        CHECK(classify(last) == AddressClass::Lan);
    }
}
