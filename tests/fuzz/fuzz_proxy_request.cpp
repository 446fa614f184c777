// libFuzzer target for the egress proxy's request path without sockets:
// request bytes -> Beast parser (the proxy's settings) -> target validation ->
// pre_decide -> (for names) decide over addresses taken from the input ->
// the refusal response. Aborts when an allowed decision would dial an address
// the policy must never allow (loopback, unspecified, multicast, broadcast,
// reserved, this host, or LAN without allow-LAN).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "agentctl/policy.hpp"
#include "egress_proxy/request_screen.hpp"
#include "egress_proxy/responses.hpp"

namespace {

using namespace agentctl;

const policy::NetworkPolicy& fuzz_policy(bool allow_lan) {
    static const auto make = [](bool lan) {
        policy::NetworkPolicy p;
        p.allow_lan = lan;
        p.deny_lan = !lan;
        for (const char* entry :
             {"example.com:443", "*.example.org", "api.test:80,8080", "192.0.3.3:80", "[2001:4860::1]:443"}) {
            p.allow.push_back(policy::parse_allow_entry(entry, "fuzz"));
        }
        return p;
    };
    static const policy::NetworkPolicy strict = make(false);
    static const policy::NetworkPolicy lan = make(true);
    return allow_lan ? lan : strict;
}

void check_allowed(const policy::Decision& decision, bool allow_lan, std::span<const policy::IpAddress> own) {
    if (!decision.allowed) return;
    if (!decision.address) std::abort();
    auto kind = policy::classify(*decision.address);
    bool ok = kind == policy::AddressClass::Public || (allow_lan && kind == policy::AddressClass::Lan);
    if (!ok) std::abort();
    for (const auto& address : own) {
        if (address == *decision.address) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    bool allow_lan = (data[0] & 1) != 0;
    std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
    static const std::vector<policy::IpAddress> own = {*policy::parse_ip_literal("192.0.2.2"),
                                                       *policy::parse_ip_literal("127.0.0.1")};
    const auto& p = fuzz_policy(allow_lan);
    auto result = egress_proxy::screen_request(bytes, p, own, 8192);
    using Stage = egress_proxy::ScreenResult::Stage;
    if (result.stage == Stage::Rejected) {
        (void)egress_proxy::refusal_response(*result.refusal, "", 0, "fuzz");
        return 0;
    }
    if (result.stage == Stage::Decided) {
        check_allowed(*result.decision, allow_lan, own);
        if (!result.decision->allowed) {
            egress_proxy::Refusal refusal{403, result.decision->reason, result.decision->detail};
            (void)egress_proxy::refusal_response(refusal, result.target->host, result.target->port, "fuzz");
        }
        return 0;
    }
    if (result.stage == Stage::NeedsLookup) {
        // "Resolved" addresses: the last bytes of the input, 4 at a time.
        std::vector<policy::IpAddress> resolved;
        for (std::size_t i = 0; i + 4 <= bytes.size() && resolved.size() < 4; i += 4) {
            policy::IpAddress address;
            for (int k = 0; k < 4; ++k) address.bytes[k] = static_cast<std::uint8_t>(bytes[bytes.size() - 1 - i - k]);
            resolved.push_back(address);
        }
        resolved.push_back(own[0]);
        auto decision = policy::decide(p, result.target->host, result.target->port, resolved, own);
        check_allowed(decision, allow_lan, own);
    }
    return 0;
}
