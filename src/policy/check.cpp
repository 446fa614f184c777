// `policy check`: one destination through pre_decide()/decide(), every address
// with its own verdict, rendered as a table or JSON.
#include "policy/check.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "policy/addresses.hpp"

namespace agentctl::policy {
namespace {

[[noreturn]] void bad_destination(std::string_view text, std::string_view what) {
    throw Error(fmt::format("invalid destination \"{}\": {}", text, what),
                "write HOST, HOST:PORT or [IPv6]:PORT, e.g. api.example.com:443");
}

std::uint16_t parse_port(std::string_view text, std::string_view whole) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 65535) {
        bad_destination(whole, fmt::format("port \"{}\" is not a number from 1 to 65535", text));
    }
    return static_cast<std::uint16_t>(value);
}

}  // namespace

Destination parse_destination(std::string_view text) {
    Destination out;
    std::string_view rest = text;
    if (rest.empty()) bad_destination(text, "it is empty");
    if (auto scheme = rest.find("://"); scheme != std::string_view::npos) {
        auto name = rest.substr(0, scheme);
        if (name == "http") {
            out.port = 80;
        } else if (name != "https") {
            bad_destination(text, "only http:// and https:// URLs are understood");
        }
        rest = rest.substr(scheme + 3);
        if (auto slash = rest.find_first_of("/?#"); slash != std::string_view::npos) {
            if (rest.substr(slash) != "/") bad_destination(text, "a path plays no part in the decision; give the host");
            rest = rest.substr(0, slash);
        }
    }
    if (rest.starts_with("[")) {
        auto close = rest.find(']');
        if (close == std::string_view::npos) bad_destination(text, "'[' is not closed");
        out.host = std::string(rest.substr(1, close - 1));
        auto after = rest.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') bad_destination(text, "unexpected text after ']'");
            out.port = parse_port(after.substr(1), text);
        }
    } else if (std::count(rest.begin(), rest.end(), ':') > 1) {
        out.host = std::string(rest);  // a bare IPv6 address
    } else if (auto colon = rest.find(':'); colon != std::string_view::npos) {
        out.host = std::string(rest.substr(0, colon));
        out.port = parse_port(rest.substr(colon + 1), text);
    } else {
        out.host = std::string(rest);
    }
    if (out.host.empty()) bad_destination(text, "the host is empty");
    return out;
}

CheckResult check_destination(const NetworkPolicy& policy, std::string_view text, Resolver& resolver,
                              std::span<const IpAddress> host_own, RouteTable* routes) {
    auto destination = parse_destination(text);
    CheckResult result;
    result.host = destination.host;
    result.port = destination.port;
    for (const auto& rule : policy.allow) {
        if (rule_names_host(rule, destination.host)) result.matching_rules.push_back(rule);
    }
    auto finish = [&](const Decision& decision) {
        result.allowed = decision.allowed;
        result.reason = decision.reason;
        result.detail = decision.detail;
        result.rule = decision.rule;
        result.address = decision.address;
        return result;
    };
    if (auto early = pre_decide(policy, destination.host, destination.port, host_own)) {
        if (routes != nullptr && early->allowed && early->address) {
            if (auto refused = vet_route(*early->address, routes->route_to(*early->address))) early = refused;
        }
        if (auto ip = parse_ip_literal(normalise_host(destination.host))) {
            result.addresses.push_back({*ip, early->allowed, early->reason, early->detail});
        }
        return finish(*early);
    }
    result.resolved = true;
    auto addresses = resolver.resolve(normalise_host(destination.host));
    for (const auto& address : addresses) {
        auto one =
            decide(policy, destination.host, destination.port, std::span<const IpAddress>(&address, 1), host_own);
        if (routes != nullptr && one.allowed) {
            if (auto refused = vet_route(address, routes->route_to(address))) one = std::move(*refused);
        }
        result.addresses.push_back({address, one.allowed, one.reason, one.detail});
    }
    finish(routes != nullptr ? decide_dialled(policy, destination.host, destination.port, addresses, host_own, *routes)
                             : decide(policy, destination.host, destination.port, addresses, host_own));
    // decide() says "no-address" only after pre_decide() let the name through.
    result.unresolved = addresses.empty() && result.reason == Reason::NoAddress;
    return result;
}

std::string render_check_table(const CheckResult& result) {
    const bool v6 = result.host.find(':') != std::string::npos;
    std::string text = fmt::format("Destination: {}:{}\n", v6 ? "[" + result.host + "]" : result.host, result.port);
    if (result.unresolved) {
        text += fmt::format("Verdict:     allowed by the policy, but the name does not resolve now ({})\n",
                            to_string(result.reason));
    } else {
        text += fmt::format("Verdict:     {} ({})\n", result.allowed ? "allowed" : "refused", to_string(result.reason));
    }
    text += fmt::format("Why:         {}\n", result.detail);
    if (result.rule) {
        text += fmt::format("Rule:        {} (from {})\n", result.rule->entry(),
                            result.rule->origin.empty() ? "unknown" : result.rule->origin);
    }
    for (const auto& rule : result.matching_rules) {
        if (result.rule && rule.entry() == result.rule->entry() && rule.origin == result.rule->origin) continue;
        text += fmt::format("{}{} (from {})\n", result.rule ? "Also names:  " : "Named by:    ", rule.entry(),
                            rule.origin.empty() ? "unknown" : rule.origin);
    }
    if (result.address) text += fmt::format("Dial:        {}\n", result.address->to_string());
    if (!result.enforced_by.empty()) text += fmt::format("Enforced by: {}\n", result.enforced_by);
    if (!result.addresses.empty()) {
        std::size_t width = 7;
        for (const auto& verdict : result.addresses) width = std::max(width, verdict.address.to_string().size());
        text += fmt::format("\n{:<{}}  {:<7}  REASON\n", "ADDRESS", width, "VERDICT");
        for (const auto& verdict : result.addresses) {
            text += fmt::format("{:<{}}  {:<7}  {}\n", verdict.address.to_string(), width,
                                verdict.allowed ? "allowed" : "refused", to_string(verdict.reason));
        }
    } else if (result.resolved) {
        text += "\n(the name did not resolve)\n";
    }
    return text;
}

nlohmann::json check_to_json(const CheckResult& result) {
    nlohmann::json addresses = nlohmann::json::array();
    for (const auto& verdict : result.addresses) {
        addresses.push_back({{"address", verdict.address.to_string()},
                             {"allowed", verdict.allowed},
                             {"reason", to_string(verdict.reason)},
                             {"detail", verdict.detail}});
    }
    nlohmann::json rule = nullptr;
    if (result.rule) rule = {{"entry", result.rule->entry()}, {"origin", result.rule->origin}};
    nlohmann::json matching = nlohmann::json::array();
    for (const auto& r : result.matching_rules) matching.push_back({{"entry", r.entry()}, {"origin", r.origin}});
    return {{"host", result.host},
            {"port", result.port},
            {"allowed", result.allowed},
            {"reason", to_string(result.reason)},
            {"detail", result.detail},
            {"unresolved", result.unresolved},
            {"rule", rule},
            {"matching_rules", matching},
            {"enforced_by", result.enforced_by},
            {"address", result.address ? nlohmann::json(result.address->to_string()) : nlohmann::json(nullptr)},
            {"addresses", addresses}};
}

int check_exit_code(const CheckResult& result) {
    if (result.unresolved) return exit_code::k_policy_unresolved;
    return result.allowed ? exit_code::k_ok : exit_code::k_policy_refused;
}

}  // namespace agentctl::policy
