// Helpers around IpAddress shared inside the policy module.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "agentctl/policy.hpp"

namespace agentctl::policy {

// The IPv4 address an IPv6 address stands for when it is v4-mapped
// (::ffff:a.b.c.d) or v4-compatible (::a.b.c.d); an IPv4 address itself.
// nullopt otherwise. Used to compare "the same destination" across spellings.
[[nodiscard]] std::optional<IpAddress> embedded_ipv4(const IpAddress& address);

// True when `address` is one of `own` (compared through embedded_ipv4, so
// ::ffff:10.0.0.5 matches 10.0.0.5).
[[nodiscard]] bool is_own_address(const IpAddress& address, std::span<const IpAddress> own);

// Same destination, whatever the spelling (v4 vs v4-mapped).
[[nodiscard]] bool same_destination(const IpAddress& a, const IpAddress& b);

// Host-name syntax (lower-case LDH labels of 1-63 characters, at most 253 in
// all, last label not numeric). Returns an empty string when valid, otherwise
// what is wrong, as a phrase ("label \"-a\" starts with a hyphen").
[[nodiscard]] std::string hostname_problem(std::string_view host);

// Whether `rule` names `host` (a normalised name or an IP literal), whatever
// its ports: the same matching decide() uses.
[[nodiscard]] bool rule_names_host(const AllowRule& rule, std::string_view host);

// `text` with its ASCII letters in lower case (host names, URL schemes, HTTP header names).
[[nodiscard]] std::string ascii_lower(std::string_view text);

}  // namespace agentctl::policy
