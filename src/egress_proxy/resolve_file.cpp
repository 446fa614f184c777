#include "egress_proxy/resolve_file.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "agentctl/error.hpp"
#include "core/files.hpp"

namespace agentctl::egress_proxy {
namespace {

std::optional<policy::IpAddress> parse_strict_address(const std::string& text) {
    policy::IpAddress address;
    if (::inet_pton(AF_INET, text.c_str(), address.bytes.data()) == 1) return address;
    address.v6 = true;
    if (::inet_pton(AF_INET6, text.c_str(), address.bytes.data()) == 1) return address;
    return std::nullopt;
}

bool valid_name(std::string_view name) {
    if (name.empty() || name.size() > 253) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
               c == '_';
    });
}

[[noreturn]] void fail(const std::string& path, int line, int column, const std::string& field,
                       const std::string& message) {
    throw Error(Diagnostic{path, line, column, field, message}.render(),
                "fix the line: each line is `ADDRESS NAME [NAME...]`, as in /etc/hosts");
}

}  // namespace

ResolveMap ResolveMap::parse(std::string_view text, const std::string& path) {
    ResolveMap map;
    int line_number = 0;
    while (!text.empty()) {
        ++line_number;
        std::size_t end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
        if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);

        std::vector<std::pair<std::string, int>> words;  // word, 1-based column
        std::size_t i = 0;
        while (i < line.size()) {
            if (line[i] == ' ' || line[i] == '\t' || line[i] == '\r') {
                ++i;
                continue;
            }
            std::size_t start = i;
            while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
            words.emplace_back(std::string(line.substr(start, i - start)), static_cast<int>(start) + 1);
        }
        if (words.empty()) continue;
        auto address = parse_strict_address(words[0].first);
        if (!address) {
            fail(path, line_number, words[0].second, "address",
                 "`" + words[0].first + "` is not an IPv4 or IPv6 address");
        }
        if (words.size() < 2) fail(path, line_number, words[0].second, "name", "an address without a host name");
        for (std::size_t w = 1; w < words.size(); ++w) {
            if (!valid_name(words[w].first)) {
                fail(path, line_number, words[w].second, "name", "`" + words[w].first + "` is not a valid host name");
            }
            auto& list = map.m_names[policy::normalise_host(words[w].first)];
            if (std::find(list.begin(), list.end(), *address) == list.end()) list.push_back(*address);
        }
    }
    return map;
}

ResolveMap ResolveMap::load(const std::string& path) { return parse(core::read_file(path), path); }

std::optional<std::vector<policy::IpAddress>> ResolveMap::lookup(std::string_view host) const {
    auto it = m_names.find(policy::normalise_host(host));
    if (it == m_names.end()) return std::nullopt;
    return it->second;
}

}  // namespace agentctl::egress_proxy
