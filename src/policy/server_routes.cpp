// make_server_route_table and the /proc/net/fib_trie reader behind it
// (agentctl/host_network.hpp): where an Incus server's kernel delivers a
// connection, for a proxy that runs in an instance on that server's bridge
// and so cannot ask the server's kernel itself.
//
// The instance's own kernel sends every address beyond its bridge to the
// server, the server's addresses included: from inside, an address the server
// gained after the instance started looks like any other. The server's own
// table, mounted read-only into the instance, says which ones it keeps.
#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "agentctl/host_network.hpp"

namespace agentctl::policy {
namespace {

std::string_view trim(std::string_view text) {
    const auto first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(" \t\r");
    return text.substr(first, last - first + 1);
}

bool delivered_here(std::string_view type) {
    return type == "LOCAL" || type == "BROADCAST" || type == "ANYCAST" || type == "MULTICAST";
}

class ServerRouteTable final : public RouteTable {
public:
    ServerRouteTable(std::string path, std::unique_ptr<RouteTable> own)
        : m_path(std::move(path)), m_own(std::move(own)) {}

    Route route_to(const IpAddress& address) override {
        Route route = m_own->route_to(address);
        if (route.kind != RouteKind::Away) return route;
        // Read at every call: the server's table as it is now.
        std::ifstream in(m_path, std::ios::binary);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!in.good() && !in.eof()) text.clear();
        if (text.empty()) {
            route.kind = RouteKind::Unknown;
            return route;
        }
        // ::ffff:a.b.c.d is dialled as a.b.c.d.
        IpAddress dialled = address;
        static constexpr std::array<std::uint8_t, 12> k_mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (address.v6 && std::equal(k_mapped.begin(), k_mapped.end(), address.bytes.begin())) {
            dialled = IpAddress{};
            std::copy_n(address.bytes.begin() + 12, 4, dialled.bytes.begin());
        }
        for (const auto& prefix : fib_trie_local_prefixes(text)) {
            if (prefix_contains(prefix, dialled)) {
                route.kind = RouteKind::HostLocal;
                route.interface = "the Incus server's routing table";
                return route;
            }
        }
        return route;
    }

private:
    std::string m_path;
    std::unique_ptr<RouteTable> m_own;
};

}  // namespace

bool prefix_contains(const IpPrefix& prefix, const IpAddress& address) {
    if (prefix.address.v6 != address.v6) return false;
    const int bits = address.v6 ? 128 : 32;
    const int length = std::clamp(prefix.length, 0, bits);
    for (int i = 0; i < length; ++i) {
        const auto mask = static_cast<std::uint8_t>(0x80U >> (i % 8));
        if ((prefix.address.bytes[static_cast<std::size_t>(i / 8)] & mask) !=
            (address.bytes[static_cast<std::size_t>(i / 8)] & mask)) {
            return false;
        }
    }
    return true;
}

std::vector<IpPrefix> fib_trie_local_prefixes(std::string_view fib_trie) {
    // A leaf is `|-- ADDRESS`, each route of it a line `/LENGTH SCOPE TYPE [tos=N]` below.
    std::vector<IpPrefix> out;
    std::optional<IpAddress> leaf;
    std::size_t start = 0;
    while (start < fib_trie.size()) {
        auto end = fib_trie.find('\n', start);
        if (end == std::string_view::npos) end = fib_trie.size();
        const auto line = trim(fib_trie.substr(start, end - start));
        start = end + 1;
        if (line.starts_with("|--")) {
            leaf = parse_ip_literal(trim(line.substr(3)));
            if (leaf && leaf->v6) leaf.reset();
            continue;
        }
        if (!line.starts_with("/")) {  // a node, a table's name: no leaf until the next `|--`
            leaf.reset();
            continue;
        }
        if (!leaf) continue;
        std::istringstream fields{std::string(line.substr(1))};
        int length = -1;
        std::string scope, type;
        if (!(fields >> length >> scope >> type) || length < 0 || length > 32) continue;
        if (!delivered_here(type)) continue;
        IpPrefix prefix{*leaf, length};
        if (std::find(out.begin(), out.end(), prefix) == out.end()) out.push_back(prefix);
    }
    return out;
}

std::unique_ptr<RouteTable> make_server_route_table(std::string server_fib_trie, std::unique_ptr<RouteTable> own) {
    return std::make_unique<ServerRouteTable>(std::move(server_fib_trie), std::move(own));
}

}  // namespace agentctl::policy
