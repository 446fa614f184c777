// IP literal parsing (every spelling a resolver or URL parser accepts),
// canonical text, and address classification.
#include <arpa/inet.h>

#include <cctype>
#include <cstring>

#include "agentctl/policy.hpp"
#include "policy/addresses.hpp"

namespace agentctl::policy {
namespace {

// One part of an inet_aton-style IPv4 literal: decimal, 0x hex (an empty "0x"
// is 0, as glibc and the WHATWG URL parser read it) or 0-prefixed octal.
std::optional<std::uint64_t> parse_v4_part(std::string_view part) {
    if (part.empty()) return std::nullopt;
    unsigned base = 10;
    if (part.size() >= 2 && part[0] == '0' && (part[1] == 'x' || part[1] == 'X')) {
        base = 16;
        part.remove_prefix(2);
        if (part.empty()) return 0;
    } else if (part.size() >= 2 && part[0] == '0') {
        base = 8;
        part.remove_prefix(1);
    }
    std::uint64_t value = 0;
    for (char c : part) {
        unsigned digit = 0;
        if (c >= '0' && c <= '9') {
            digit = static_cast<unsigned>(c - '0');
        } else if (base == 16 && c >= 'a' && c <= 'f') {
            digit = static_cast<unsigned>(c - 'a' + 10);
        } else if (base == 16 && c >= 'A' && c <= 'F') {
            digit = static_cast<unsigned>(c - 'A' + 10);
        } else {
            return std::nullopt;
        }
        if (digit >= base) return std::nullopt;
        value = value * base + digit;
        if (value > 0xffffffffULL) return std::nullopt;  // also stops overflow
    }
    return value;
}

// a, a.b, a.b.c, a.b.c.d with inet_aton's widths for the last part; one
// trailing dot is accepted (the WHATWG URL parser accepts it too).
std::optional<IpAddress> parse_v4(std::string_view text) {
    if (!text.empty() && text.back() == '.') text.remove_suffix(1);
    if (text.empty()) return std::nullopt;
    std::uint64_t parts[4] = {};
    std::size_t count = 0;
    while (true) {
        auto dot = text.find('.');
        auto piece = text.substr(0, dot);
        if (count == 4) return std::nullopt;
        auto value = parse_v4_part(piece);
        if (!value) return std::nullopt;
        parts[count++] = *value;
        if (dot == std::string_view::npos) break;
        text.remove_prefix(dot + 1);
    }
    std::uint64_t result = 0;
    for (std::size_t i = 0; i + 1 < count; ++i) {
        if (parts[i] > 0xff) return std::nullopt;
        result |= parts[i] << (8 * (3 - i));
    }
    std::uint64_t last_limit = 0xffffffffULL >> (8 * (count - 1));
    if (parts[count - 1] > last_limit) return std::nullopt;
    result |= parts[count - 1];
    IpAddress address;
    address.v6 = false;
    address.bytes[0] = static_cast<std::uint8_t>(result >> 24);
    address.bytes[1] = static_cast<std::uint8_t>(result >> 16);
    address.bytes[2] = static_cast<std::uint8_t>(result >> 8);
    address.bytes[3] = static_cast<std::uint8_t>(result);
    return address;
}

std::optional<IpAddress> parse_v6(std::string_view text) {
    // A zone (fe80::1%eth0) names an interface, not another address: drop it.
    auto percent = text.find('%');
    if (percent != std::string_view::npos) {
        auto zone = text.substr(percent + 1);
        if (zone.empty()) return std::nullopt;
        for (char c : zone) {
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return std::nullopt;
        }
        text = text.substr(0, percent);
    }
    if (text.size() > 45 || text.find(':') == std::string_view::npos) return std::nullopt;
    char buffer[64] = {};
    std::memcpy(buffer, text.data(), text.size());
    IpAddress address;
    address.v6 = true;
    if (::inet_pton(AF_INET6, buffer, address.bytes.data()) != 1) return std::nullopt;
    return address;
}

IpAddress v4_from(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    IpAddress address;
    address.bytes[0] = a;
    address.bytes[1] = b;
    address.bytes[2] = c;
    address.bytes[3] = d;
    return address;
}

struct AddressRange {
    IpAddress base;
    unsigned prefix_length = 0;
};

// k_lan_ranges, parsed once.
const std::vector<AddressRange>& lan_ranges() {
    static const std::vector<AddressRange> ranges = [] {
        std::vector<AddressRange> parsed;
        for (auto text : k_lan_ranges) {
            const auto slash = text.find('/');
            AddressRange range;
            range.base = *parse_ip_literal(text.substr(0, slash));
            for (char digit : text.substr(slash + 1)) range.prefix_length = range.prefix_length * 10 + (digit - '0');
            parsed.push_back(range);
        }
        return parsed;
    }();
    return ranges;
}

bool in_range(const IpAddress& address, const AddressRange& range) {
    if (address.v6 != range.base.v6) return false;
    const unsigned whole = range.prefix_length / 8, rest = range.prefix_length % 8;
    for (unsigned i = 0; i < whole; ++i) {
        if (address.bytes[i] != range.base.bytes[i]) return false;
    }
    const auto mask = static_cast<std::uint8_t>(0xff00U >> rest);
    return rest == 0 || (address.bytes[whole] & mask) == (range.base.bytes[whole] & mask);
}

bool is_lan(const IpAddress& address) {
    for (const auto& range : lan_ranges()) {
        if (in_range(address, range)) return true;
    }
    return false;
}

AddressClass classify_v4(const std::array<std::uint8_t, 16>& b) {
    const unsigned a0 = b[0], a1 = b[1], a2 = b[2];
    if (a0 == 0) return AddressClass::Unspecified;
    if (a0 == 127) return AddressClass::Loopback;
    if (a0 == 255 && a1 == 255 && a2 == 255 && b[3] == 255) return AddressClass::Broadcast;
    if (a0 >= 240) return AddressClass::Reserved;
    if (a0 >= 224) return AddressClass::Multicast;
    if (is_lan(v4_from(b[0], b[1], b[2], b[3]))) return AddressClass::Lan;
    // Never routable on the internet: IETF protocol assignments (192.0.0/24),
    // documentation (192.0.2/24, 198.51.100/24, 203.0.113/24), benchmarking
    // (198.18/15) and the retired 6to4 relay anycast (192.88.99/24).
    if (a0 == 192 && a1 == 0 && (a2 == 0 || a2 == 2)) return AddressClass::Reserved;
    if (a0 == 198 && a1 == 51 && a2 == 100) return AddressClass::Reserved;
    if (a0 == 203 && a1 == 0 && a2 == 113) return AddressClass::Reserved;
    if (a0 == 198 && (a1 & 0xfe) == 18) return AddressClass::Reserved;
    if (a0 == 192 && a1 == 88 && a2 == 99) return AddressClass::Reserved;
    return AddressClass::Public;
}

// Ranks classes so that the most restrictive of several candidates wins.
int severity(AddressClass c) {
    switch (c) {
        case AddressClass::Public: return 0;
        case AddressClass::Lan: return 1;
        case AddressClass::Reserved: return 2;
        case AddressClass::Broadcast: return 3;
        case AddressClass::Multicast: return 4;
        case AddressClass::Unspecified: return 5;
        case AddressClass::Loopback: return 6;
    }
    return 6;
}

AddressClass stricter(AddressClass a, AddressClass b) { return severity(a) >= severity(b) ? a : b; }

bool all_zero(const std::array<std::uint8_t, 16>& b, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
        if (b[i] != 0) return false;
    }
    return true;
}

}  // namespace

std::string IpAddress::to_string() const {
    char buffer[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buffer, sizeof buffer);
    return buffer;
}

std::optional<IpAddress> parse_ip_literal(std::string_view text) {
    if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
        text = text.substr(1, text.size() - 2);
        return parse_v6(text);
    }
    if (text.find(':') != std::string_view::npos) return parse_v6(text);
    return parse_v4(text);
}

std::optional<IpAddress> embedded_ipv4(const IpAddress& address) {
    if (!address.v6) return address;
    const auto& b = address.bytes;
    // ::ffff:a.b.c.d (v4-mapped)
    if (all_zero(b, 0, 10) && b[10] == 0xff && b[11] == 0xff) return v4_from(b[12], b[13], b[14], b[15]);
    // ::a.b.c.d (v4-compatible, deprecated); :: and ::1 are themselves
    if (all_zero(b, 0, 12) && !(b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1))
        return v4_from(b[12], b[13], b[14], b[15]);
    return std::nullopt;
}

AddressClass classify(const IpAddress& address) {
    const auto& b = address.bytes;
    if (!address.v6) return classify_v4(b);
    if (auto v4 = embedded_ipv4(address)) return classify_v4(v4->bytes);
    if (all_zero(b, 0, 15)) return b[15] == 1 ? AddressClass::Loopback : AddressClass::Unspecified;
    // NAT64 well-known prefix 64:ff9b::/96.
    if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && all_zero(b, 4, 12))
        return classify_v4(v4_from(b[12], b[13], b[14], b[15]).bytes);
    // Local-use NAT64 64:ff9b:1::/48 (RFC 8215): the operator picks the prefix
    // length, which agentctl cannot know. The /96 form (bits 48-95 zero) is
    // judged by its last 32 bits; any other placement is refused as reserved.
    if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0x00 && b[5] == 0x01) {
        if (all_zero(b, 6, 12)) return classify_v4(v4_from(b[12], b[13], b[14], b[15]).bytes);
        return AddressClass::Reserved;
    }
    // 6to4 2002::/16: the IPv4 address in bits 16-47.
    if (b[0] == 0x20 && b[1] == 0x02) return classify_v4(v4_from(b[2], b[3], b[4], b[5]).bytes);
    // Teredo 2001::/32: the server (bits 32-63) and the client (the inverted last
    // 32 bits); both are judged and the strictest wins.
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00) {
        AddressClass server = classify_v4(v4_from(b[4], b[5], b[6], b[7]).bytes);
        auto inv = [](std::uint8_t x) { return static_cast<std::uint8_t>(~x); };
        AddressClass client = classify_v4(v4_from(inv(b[12]), inv(b[13]), inv(b[14]), inv(b[15])).bytes);
        return stricter(server, client);
    }
    if (b[0] == 0xff) return AddressClass::Multicast;
    if (is_lan(address)) return AddressClass::Lan;  // fc00::/7 ULA, fe80::/10 link-local, fec0::/10 site-local
    // Outside global unicast 2000::/3 nothing is routable.
    if ((b[0] & 0xe0) != 0x20) return AddressClass::Reserved;
    // Inside it: documentation (2001:db8::/32, 3fff::/20), ORCHID (2001:10::/28,
    // 2001:20::/28), benchmarking (2001:2::/48).
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return AddressClass::Reserved;
    if (b[0] == 0x3f && b[1] == 0xff && (b[2] & 0xf0) == 0x00) return AddressClass::Reserved;
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && ((b[3] >> 4) == 1 || (b[3] >> 4) == 2))
        return AddressClass::Reserved;  // 2001:10::/28 and 2001:20::/28
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x02 && b[4] == 0 && b[5] == 0)
        return AddressClass::Reserved;
    return AddressClass::Public;
}

std::string_view to_string(AddressClass address_class) {
    switch (address_class) {
        case AddressClass::Public: return "public";
        case AddressClass::Loopback: return "loopback";
        case AddressClass::Unspecified: return "unspecified";
        case AddressClass::Multicast: return "multicast";
        case AddressClass::Broadcast: return "broadcast";
        case AddressClass::Reserved: return "reserved";
        case AddressClass::Lan: return "lan";
    }
    return "reserved";
}

}  // namespace agentctl::policy

namespace agentctl::policy {

bool same_destination(const IpAddress& a, const IpAddress& b) {
    if (a == b) return true;
    auto a4 = embedded_ipv4(a);
    auto b4 = embedded_ipv4(b);
    return a4 && b4 && *a4 == *b4;
}

bool is_own_address(const IpAddress& address, std::span<const IpAddress> own) {
    for (const auto& mine : own) {
        if (same_destination(address, mine)) return true;
    }
    return false;
}

}  // namespace agentctl::policy
