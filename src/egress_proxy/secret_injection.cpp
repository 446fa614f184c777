#include "egress_proxy/secret_injection.hpp"

#include <algorithm>
#include <utility>

#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/core/string.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "policy/addresses.hpp"

namespace agentctl::egress_proxy {
namespace {

namespace base64 = boost::beast::detail::base64;

using policy::ascii_lower;

std::string required_string(const nlohmann::json& object, const char* key, const std::string& where) {
    if (!object.is_object() || !object.contains(key) || !object[key].is_string() ||
        object[key].get_ref<const std::string&>().empty()) {
        throw Error(fmt::format("secret payload: field `{}{}` is missing or empty", where, key),
                    "the egress proxy is started by agentctl, which writes this");
    }
    return object[key].get<std::string>();
}

bool replace_all(std::string& text, std::string_view from, std::string_view to) {
    bool any = false;
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
        any = true;
    }
    return any;
}

std::string decode_base64(std::string_view text) {
    std::string out(base64::decoded_size(text.size()), '\0');
    auto [written, read] = base64::decode(out.data(), text.data(), text.size());
    auto data = text;
    while (!data.empty() && data.back() == '=') data.remove_suffix(1);
    if (read < data.size()) return {};  // not base64: nothing of ours in it
    out.resize(written);
    return out;
}

// The credentials of a `Basic` value, decoded; nullopt when it is none.
std::optional<std::string> basic_credentials(std::string_view value) {
    constexpr std::string_view k_basic = "basic ";
    if (value.size() <= k_basic.size() ||
        !boost::beast::iequals(boost::beast::string_view(value.data(), k_basic.size()),
                               boost::beast::string_view(k_basic.data(), k_basic.size())))
        return std::nullopt;
    auto rest = value.substr(k_basic.size());
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
    return decode_base64(rest);
}

// Whether `secret` is bound to `host` (lower case) in any header.
bool bound_to_host(const InjectedSecret& secret, std::string_view host) {
    return std::any_of(secret.bindings.begin(), secret.bindings.end(),
                       [&](const SecretHost& binding) { return binding.host == host; });
}

}  // namespace

std::string encode_base64(std::string_view text) {
    std::string out(base64::encoded_size(text.size()), '\0');
    out.resize(base64::encode(out.data(), text.data(), text.size()));
    return out;
}

SecretPayload parse_secret_payload(std::string_view json) {
    auto doc = nlohmann::json::parse(json, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
        throw Error("secret payload: not a JSON object", "the egress proxy is started by agentctl, which writes this");
    }
    SecretPayload payload;
    const auto& ca = doc.contains("ca") ? doc["ca"] : nlohmann::json();
    payload.ca_cert_pem = required_string(ca, "cert", "ca.");
    payload.ca_key_pem = required_string(ca, "key", "ca.");
    if (!doc.contains("secrets") || !doc["secrets"].is_array()) {
        throw Error("secret payload: field `secrets` must be a list", "");
    }
    for (std::size_t i = 0; i < doc["secrets"].size(); ++i) {
        const auto& entry = doc["secrets"][i];
        const auto where = fmt::format("secrets[{}].", i);
        InjectedSecret secret;
        secret.name = required_string(entry, "name", where);
        secret.placeholder = required_string(entry, "placeholder", where);
        secret.value = required_string(entry, "value", where);
        if (!entry.contains("bindings") || !entry["bindings"].is_array() || entry["bindings"].empty()) {
            throw Error(fmt::format("secret payload: field `{}bindings` must be a non-empty list", where), "");
        }
        for (std::size_t j = 0; j < entry["bindings"].size(); ++j) {
            const auto binding_where = fmt::format("{}bindings[{}].", where, j);
            secret.bindings.push_back({ascii_lower(required_string(entry["bindings"][j], "host", binding_where)),
                                       ascii_lower(required_string(entry["bindings"][j], "header", binding_where))});
        }
        payload.secrets.push_back(std::move(secret));
    }
    return payload;
}

std::string secret_payload_json(const SecretPayload& payload) {
    nlohmann::json doc{{"ca", {{"cert", payload.ca_cert_pem}, {"key", payload.ca_key_pem}}},
                       {"secrets", nlohmann::json::array()}};
    for (const auto& secret : payload.secrets) {
        nlohmann::json bindings = nlohmann::json::array();
        for (const auto& binding : secret.bindings)
            bindings.push_back({{"host", binding.host}, {"header", binding.header}});
        doc["secrets"].push_back({{"name", secret.name},
                                  {"placeholder", secret.placeholder},
                                  {"value", secret.value},
                                  {"bindings", std::move(bindings)}});
    }
    return doc.dump();
}

SecretTable::SecretTable(std::vector<InjectedSecret> secrets) : m_secrets(std::move(secrets)) {}

bool SecretTable::binds(std::string_view host, std::uint16_t port) const {
    if (port != 443) return false;
    const auto wanted = ascii_lower(host);
    return std::any_of(m_secrets.begin(), m_secrets.end(),
                       [&](const InjectedSecret& secret) { return bound_to_host(secret, wanted); });
}

std::optional<MisplacedSecret> SecretTable::misplaced_in_body(std::string_view host,
                                                              std::string_view body_start) const {
    if (body_start.empty()) return std::nullopt;
    const auto wanted_host = ascii_lower(host);
    for (const auto& secret : m_secrets) {
        if (body_start.find(secret.placeholder) == std::string_view::npos) continue;
        if (wanted_host.empty() || !bound_to_host(secret, wanted_host)) return MisplacedSecret{secret.name, "the body"};
    }
    return std::nullopt;
}

SecretTable SecretTable::with_values(const std::vector<InjectedSecret>& fresh,
                                     std::vector<std::string>& changed) const {
    auto secrets = m_secrets;
    for (auto& secret : secrets) {
        const auto update = std::find_if(fresh.begin(), fresh.end(), [&](const InjectedSecret& candidate) {
            return candidate.name == secret.name && candidate.placeholder == secret.placeholder;
        });
        if (update == fresh.end() || update->value == secret.value) continue;
        secret.value = update->value;
        changed.push_back(secret.name);
    }
    return SecretTable(std::move(secrets));
}

InjectionResult SecretTable::inject(std::string_view host, std::string_view target,
                                    boost::beast::http::fields& fields) const {
    InjectionResult result;
    if (m_secrets.empty()) return result;
    // Most requests carry no placeholder in any header: then only the URL is
    // checked, and the fields are neither copied nor rebuilt.
    const auto has_placeholder = [this](std::string_view text) {
        return std::any_of(m_secrets.begin(), m_secrets.end(), [&](const InjectedSecret& secret) {
            return text.find(secret.placeholder) != std::string_view::npos;
        });
    };
    const bool in_headers = std::any_of(fields.begin(), fields.end(), [&](const auto& field) {
        const std::string_view value(field.value().data(), field.value().size());
        if (has_placeholder(value)) return true;
        const auto credentials = basic_credentials(value);
        return credentials && has_placeholder(*credentials);
    });
    if (!in_headers) {
        for (const auto& secret : m_secrets) {
            if (target.find(secret.placeholder) != std::string_view::npos) {
                result.misplaced = MisplacedSecret{secret.name, "the URL"};
                break;
            }
        }
        return result;
    }
    const auto wanted_host = ascii_lower(host);
    struct Head {
        std::string name;  // as the client spelt it
        std::string lower_name;
        std::string value;
    };
    std::vector<Head> heads;
    for (const auto& field : fields) {
        const std::string name(field.name_string());
        heads.push_back({name, ascii_lower(name), std::string(field.value())});
    }

    for (const auto& secret : m_secrets) {
        const auto& placeholder = secret.placeholder;
        if (target.find(placeholder) != std::string_view::npos) {
            result.misplaced = MisplacedSecret{secret.name, "the URL"};
            return result;
        }
        bool injected = false;
        for (auto& head : heads) {
            const auto& name = head.lower_name;
            const bool bound = !wanted_host.empty() &&
                               std::any_of(secret.bindings.begin(), secret.bindings.end(), [&](const auto& binding) {
                                   return binding.host == wanted_host && binding.header == name;
                               });
            std::string replaced = head.value;
            bool found = replace_all(replaced, placeholder, secret.value);
            if (!found) {
                auto credentials = basic_credentials(head.value);
                if (credentials && replace_all(*credentials, placeholder, secret.value)) {
                    found = true;
                    replaced = head.value.substr(0, 5) + " " + encode_base64(*credentials);  // keeps `Basic`'s spelling
                }
            }
            if (!found) continue;
            if (!bound) {
                result.misplaced = MisplacedSecret{secret.name, "header " + name};
                result.injected.clear();
                return result;
            }
            head.value = std::move(replaced);
            injected = true;
        }
        if (injected) result.injected.push_back(secret.name);
    }
    if (result.injected.empty()) return result;
    // Rebuilt in the same order and spelling.
    fields.clear();
    for (const auto& head : heads) fields.insert(head.name, head.value);
    return result;
}

}  // namespace agentctl::egress_proxy
