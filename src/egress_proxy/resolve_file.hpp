// The static name -> address map given with `--resolve-file` (/etc/hosts
// format), consulted before the system resolver.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentctl/policy.hpp"

namespace agentctl::egress_proxy {

class ResolveMap {
public:
    // Parses /etc/hosts text: `ADDRESS NAME [NAME...]`, `#` starts a comment.
    // Several lines may name one host; its addresses keep file order. Addresses
    // are strict (inet_pton) literals. Throws agentctl::Error rendered as
    // `PATH:LINE:COL: ...` on the first bad line (`path` is only for messages).
    [[nodiscard]] static ResolveMap parse(std::string_view text, const std::string& path);
    // Reads and parses a file; throws agentctl::Error naming it when unreadable.
    [[nodiscard]] static ResolveMap load(const std::string& path);

    // The addresses for `host` (case-insensitive, a trailing dot ignored), in
    // file order; nullopt when the map does not name it.
    [[nodiscard]] std::optional<std::vector<policy::IpAddress>> lookup(std::string_view host) const;
    [[nodiscard]] std::size_t size() const { return m_names.size(); }

private:
    std::map<std::string, std::vector<policy::IpAddress>, std::less<>> m_names;
};

}  // namespace agentctl::egress_proxy
