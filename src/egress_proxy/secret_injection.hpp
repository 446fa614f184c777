// The secrets one proxy injects, and the pure rule for a request head: a
// sandbox sees only placeholders; the proxy puts the real value in where the
// placeholder stands, in the header the secret is bound to, in requests to
// the hosts it is bound to, and refuses a request that carries a placeholder
// anywhere else (another host, another header, the URL, plain HTTP, the start
// of a body to a host the secret is not bound to). A value is never put into
// a body: a placeholder in a body to its own host goes out as it is.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/http/fields.hpp>

#include "agentctl/sandbox.hpp"

namespace agentctl::egress_proxy {

struct InjectedSecret {
    std::string name;
    std::string placeholder;
    std::string value;
    std::vector<SecretHost> bindings;  // host and header lower case; port 443
};

// The secrets and the sandbox CA a proxy gets at start, as one JSON document
// read from the descriptor `--secrets-fd` names (never a file, an argument or
// the environment): {"ca": {"cert": PEM, "key": PEM}, "secrets": [{"name",
// "placeholder", "value", "bindings": [{"host", "header"}]}]}.
struct SecretPayload {
    std::string ca_cert_pem;
    std::string ca_key_pem;
    std::vector<InjectedSecret> secrets;
};

// Parses the payload; throws agentctl::Error naming the field (never a value).
[[nodiscard]] SecretPayload parse_secret_payload(std::string_view json);
// The payload as the provider writes it into the proxy's descriptor.
[[nodiscard]] std::string secret_payload_json(const SecretPayload& payload);

// `text` in base64 (as in HTTP Basic credentials).
[[nodiscard]] std::string encode_base64(std::string_view text);

// Where a placeholder was found that it may not be.
struct MisplacedSecret {
    std::string secret;
    std::string where;  // "the URL", "header x-foo", "the body"
};

// The bytes of a request body the proxy searches for placeholders (or the
// whole body, when shorter): it reads them before it forwards the request.
inline constexpr std::size_t k_screened_body_bytes = 16 * 1024;

struct InjectionResult {
    std::vector<std::string> injected;  // names of the secrets put in, each once
    std::optional<MisplacedSecret> misplaced;
};

class SecretTable {
public:
    explicit SecretTable(std::vector<InjectedSecret> secrets);

    [[nodiscard]] bool empty() const { return m_secrets.empty(); }
    // Whether CONNECT host:port is terminated (some secret is bound to it).
    [[nodiscard]] bool binds(std::string_view host, std::uint16_t port) const;
    // Replaces the placeholders in `fields` of a request to `host` (empty: a
    // plain-HTTP request, where no secret is ever put). Leaves `fields`
    // untouched and names the first misplaced placeholder when one is found
    // where its secret does not go; `target` is the request target (URL).
    [[nodiscard]] InjectionResult inject(std::string_view host, std::string_view target,
                                         boost::beast::http::fields& fields) const;
    // The first secret whose placeholder is in `body_start` (the start of a
    // request body to `host`; empty: plain HTTP) though it is bound to no
    // header of `host`. Nothing in a body is ever replaced.
    [[nodiscard]] std::optional<MisplacedSecret> misplaced_in_body(std::string_view host,
                                                                   std::string_view body_start) const;

    // The same table with the values of `fresh` for the secrets of the same
    // name and placeholder (a rotation: placeholders and hosts stay as they
    // were); `changed` receives the names whose value changed.
    [[nodiscard]] SecretTable with_values(const std::vector<InjectedSecret>& fresh,
                                          std::vector<std::string>& changed) const;

private:
    std::vector<InjectedSecret> m_secrets;
};

}  // namespace agentctl::egress_proxy
