// The policy file the egress proxy reads: JSON, version 1.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"

namespace agentctl::policy {
namespace {

constexpr int k_policy_file_version = 1;

[[noreturn]] void malformed(std::string_view field, std::string_view what) {
    throw Error(
        fmt::format("malformed policy file: field {}: {}", field, what),
        "the file is written by agentctl; recreate the sandbox's policy with `agentctl create` or `policy add`");
}

const nlohmann::json& required(const nlohmann::json& object, const char* key, std::string_view field) {
    auto it = object.find(key);
    if (it == object.end()) malformed(field, "missing");
    return *it;
}

bool read_bool(const nlohmann::json& object, const char* key, std::string_view field) {
    const auto& value = required(object, key, field);
    if (!value.is_boolean()) malformed(field, "must be true or false");
    return value.get<bool>();
}

AllowRule read_rule(const nlohmann::json& item, std::size_t index) {
    std::string field = fmt::format("allow[{}]", index);
    if (!item.is_object()) malformed(field, "must be an object");
    const auto& domain = required(item, "domain", field + ".domain");
    if (!domain.is_string()) malformed(field + ".domain", "must be a string");
    AllowRule rule;
    try {
        rule = parse_allow_entry(domain.get<std::string>(), {});
    } catch (const Error& error) {
        malformed(field + ".domain", error.what());
    }
    if (!rule.ports.empty()) malformed(field + ".domain", "must not carry a port; ports go in \"ports\"");
    const auto& ports = required(item, "ports", field + ".ports");
    if (!ports.is_array()) malformed(field + ".ports", "must be an array of port numbers");
    for (std::size_t i = 0; i < ports.size(); ++i) {
        const auto& port = ports[i];
        if (!port.is_number_integer()) malformed(fmt::format("{}.ports[{}]", field, i), "must be an integer");
        auto value = port.get<std::int64_t>();
        if (value < 1 || value > 65535) malformed(fmt::format("{}.ports[{}]", field, i), "must be in 1-65535");
        rule.ports.push_back(static_cast<std::uint16_t>(value));
    }
    std::sort(rule.ports.begin(), rule.ports.end());
    rule.ports.erase(std::unique(rule.ports.begin(), rule.ports.end()), rule.ports.end());
    if (auto origin = item.find("origin"); origin != item.end()) {
        if (!origin->is_string()) malformed(field + ".origin", "must be a string");
        rule.origin = origin->get<std::string>();
    }
    if (auto expires = item.find("expires"); expires != item.end()) {
        if (!expires->is_number_integer() || expires->get<std::int64_t>() <= 0) {
            malformed(field + ".expires", "must be a time in seconds since the epoch");
        }
        rule.expires = expires->get<std::int64_t>();
    }
    return rule;
}

UploadBudget read_budget(const nlohmann::json& item, std::size_t index) {
    const std::string field = fmt::format("budgets[{}]", index);
    if (!item.is_object()) malformed(field, "must be an object");
    const auto& host = required(item, "host", field + ".host");
    const auto& port = required(item, "port", field + ".port");
    const auto& bytes = required(item, "bytes", field + ".bytes");
    if (!host.is_string() || host.get<std::string>().empty())
        malformed(field + ".host", "must be a host name or address");
    if (!port.is_number_integer() || port.get<std::int64_t>() < 1 || port.get<std::int64_t>() > 65535) {
        malformed(field + ".port", "must be in 1-65535");
    }
    if (!bytes.is_number_unsigned() || bytes.get<std::uint64_t>() == 0) {
        malformed(field + ".bytes", "must be a whole number above 0");
    }
    return {host.get<std::string>(), static_cast<std::uint16_t>(port.get<std::int64_t>()), bytes.get<std::uint64_t>()};
}

}  // namespace

nlohmann::json to_policy_file(const NetworkPolicy& policy) {
    nlohmann::json allow = nlohmann::json::array();
    for (const auto& rule : policy.allow) {
        std::string domain = rule.kind == HostKind::Wildcard ? "*." + rule.host : rule.host;
        allow.push_back({{"domain", domain}, {"ports", rule.ports}, {"origin", rule.origin}});
        if (rule.expires != 0) allow.back()["expires"] = rule.expires;
    }
    nlohmann::json document{
        {"version", k_policy_file_version},
        {"enabled", policy.enabled},
        {"denyLAN", policy.deny_lan},
        {"allowLAN", policy.allow_lan},
        {"allow", std::move(allow)},
        {"dns", {{"servers", policy.dns.servers}, {"disabled", policy.dns.disabled}}},
    };
    if (!policy.budgets.empty()) {
        auto& budgets = document["budgets"] = nlohmann::json::array();
        for (const auto& budget : policy.budgets) {
            budgets.push_back({{"host", budget.host}, {"port", budget.port}, {"bytes", budget.bytes}});
        }
    }
    if (policy.default_budget > 0) document["defaultBudget"] = policy.default_budget;
    return document;
}

NetworkPolicy from_policy_file(const nlohmann::json& document) {
    if (!document.is_object()) malformed("(document)", "must be a JSON object");
    const auto& version = required(document, "version", "version");
    if (!version.is_number_integer() || version.get<std::int64_t>() != k_policy_file_version) {
        malformed("version", fmt::format("must be {}", k_policy_file_version));
    }
    NetworkPolicy policy;
    policy.enabled = read_bool(document, "enabled", "enabled");
    policy.deny_lan = read_bool(document, "denyLAN", "denyLAN");
    policy.allow_lan = read_bool(document, "allowLAN", "allowLAN");
    const auto& allow = required(document, "allow", "allow");
    if (!allow.is_array()) malformed("allow", "must be an array");
    for (std::size_t i = 0; i < allow.size(); ++i) policy.allow.push_back(read_rule(allow[i], i));
    if (auto dns = document.find("dns"); dns != document.end()) {
        if (!dns->is_object()) malformed("dns", "must be an object");
        if (auto servers = dns->find("servers"); servers != dns->end()) {
            if (!servers->is_array()) malformed("dns.servers", "must be an array of addresses");
            for (std::size_t i = 0; i < servers->size(); ++i) {
                const auto& server = (*servers)[i];
                if (!server.is_string() || !parse_ip_literal(server.get<std::string>())) {
                    malformed(fmt::format("dns.servers[{}]", i), "must be an IP address");
                }
                policy.dns.servers.push_back(server.get<std::string>());
            }
        }
        if (auto disabled = dns->find("disabled"); disabled != dns->end()) {
            if (!disabled->is_boolean()) malformed("dns.disabled", "must be true or false");
            policy.dns.disabled = disabled->get<bool>();
        }
    }
    if (auto budgets = document.find("budgets"); budgets != document.end()) {
        if (!budgets->is_array()) malformed("budgets", "must be an array");
        for (std::size_t i = 0; i < budgets->size(); ++i) policy.budgets.push_back(read_budget((*budgets)[i], i));
    }
    if (auto fallback = document.find("defaultBudget"); fallback != document.end()) {
        if (!fallback->is_number_unsigned() || fallback->get<std::uint64_t>() == 0) {
            malformed("defaultBudget", "must be a whole number above 0");
        }
        policy.default_budget = fallback->get<std::uint64_t>();
    }
    return policy;
}

std::string policy_file_text(const NetworkPolicy& policy) { return to_policy_file(policy).dump(2) + "\n"; }

NetworkPolicy from_policy_file_text(std::string_view text) {
    auto document = nlohmann::json::parse(text, nullptr, false);
    if (document.is_discarded()) malformed("(document)", "is not valid JSON");
    return from_policy_file(document);
}

}  // namespace agentctl::policy
