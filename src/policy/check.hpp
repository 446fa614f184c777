// `agentctl policy check [NAME | --profile P... --allow E... --allow-lan] HOST[:PORT]`:
// what the egress proxy would do with a connection, using pre_decide() and
// decide() themselves.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "agentctl/host_network.hpp"
#include "agentctl/policy.hpp"

namespace agentctl::policy {

struct AddressVerdict {
    IpAddress address;
    bool allowed = false;
    Reason reason = Reason::NotAllowlisted;
    std::string detail;
};

struct CheckResult {
    std::string host;  // as normalised
    std::uint16_t port = 0;
    bool allowed = false;
    Reason reason = Reason::NotAllowlisted;  // Decision::reason
    std::string detail;
    std::optional<AllowRule> rule;
    std::optional<IpAddress> address;       // the address that would be dialled
    std::vector<AddressVerdict> addresses;  // every resolved address, with its own verdict
    bool resolved = false;                  // a lookup was made
    // The policy allows the name on this port, but it resolved to no address
    // now: not a refusal (the connection would go through once it resolves).
    bool unresolved = false;
    std::vector<AllowRule> matching_rules;  // every allow rule naming the host (any port), with its origin
    std::string enforced_by;                // who enforces the policy and how (set by the caller)
};

// `HOST`, `HOST:PORT`, `[v6]:PORT`, a bare IPv6 address, or an http(s) URL
// without a path. The port defaults to 443 (80 for http://). Throws
// agentctl::Error for malformed input.
struct Destination {
    std::string host;
    std::uint16_t port = 443;
};
[[nodiscard]] Destination parse_destination(std::string_view text);

// `routes`: also the egress proxy's last step, the kernel's route to the
// address it would dial (decide_dialled); none: the policy's word only.
[[nodiscard]] CheckResult check_destination(const NetworkPolicy& policy, std::string_view destination,
                                            Resolver& resolver, std::span<const IpAddress> host_own,
                                            RouteTable* routes = nullptr);

// Renderings for the CLI.
[[nodiscard]] std::string render_check_table(const CheckResult& result);
[[nodiscard]] nlohmann::json check_to_json(const CheckResult& result);
// 0 allowed, 4 refused (exit_code::k_policy_refused), 5 allowed by the policy
// but the name does not resolve now (exit_code::k_policy_unresolved).
[[nodiscard]] int check_exit_code(const CheckResult& result);

}  // namespace agentctl::policy
