// Fuzzes the allow-entry parser, IP literal parsing, allow-file text and the
// decision functions. Beyond "no crash": a parsed entry must survive its own
// round trip, and a canonical IP text must parse back to the same address.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"
#include "policy/allow_text.hpp"

using namespace agentctl;
using namespace agentctl::policy;

namespace {

void require(bool condition) {
    if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);

    if (auto ip = parse_ip_literal(input)) {
        auto again = parse_ip_literal(ip->to_string());
        require(again.has_value() && *again == *ip);
        (void)classify(*ip);
    }

    NetworkPolicy policy;
    try {
        auto rule = parse_allow_entry(input, "fuzz");
        auto again = parse_allow_entry(rule.entry(), "fuzz");
        require(again == rule);
        policy.allow.push_back(rule);
    } catch (const Error&) {
    }

    try {
        auto rules = parse_allow_text(input, "fuzz.txt");
        policy.allow.insert(policy.allow.end(), rules.begin(), rules.end());
    } catch (const Error&) {
    }

    // The decision on the input as a host: never throws, always gives a reason.
    for (bool allow_lan : {false, true}) {
        policy.allow_lan = allow_lan;
        policy.deny_lan = !allow_lan;
        auto early = pre_decide(policy, input, 443);
        IpAddress public_address;
        public_address.bytes = {93, 184, 216, 34};
        IpAddress lan_address;
        lan_address.bytes = {10, 0, 0, 1};
        IpAddress resolved[] = {lan_address, public_address};
        auto decision = decide(policy, input, 443, resolved);
        require(!policy::to_string(decision.reason).empty());
        require(decision.allowed == decision.address.has_value());
        if (early) require(early->reason == decision.reason);
    }
    return 0;
}
