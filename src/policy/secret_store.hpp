// Secrets kept on the host for the egress proxy to inject (`agentctl secret`):
// one file per secret, STATE/secrets/NAME.json, mode 0600 in a 0700
// directory. A secret's value never goes into the sandbox, a log, status,
// preview output or a process argument: only the proxy of a sandbox it is
// bound to gets it, over a pipe, at start.
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "agentctl/sandbox.hpp"

namespace agentctl {
class ProcessRunner;
}

namespace agentctl::policy {

enum class SecretSource {
    Value,    // read from stdin by `secret set`
    Env,      // copied from an environment variable of `secret set`
    File,     // copied from a file by `secret set`
    Command,  // the output of a command, run at each sandbox start
};

[[nodiscard]] std::string_view to_string(SecretSource source);

// Where the proxy puts a secret: requests to `host` (port 443), in the request
// header `header` (lower case), which may carry it as is, after `Bearer` or
// `token`, or inside Basic credentials.
struct SecretHost {
    std::string host;
    std::string header;
    bool operator==(const SecretHost&) const = default;
};

struct StoredSecret {
    std::string name;
    SecretSource source = SecretSource::Value;
    std::string value;  // empty for Command (run at each start)
    std::string from;   // Env: the variable, File: the path, Command: the command; not secret
    // Where it is injected; empty: the catalog's credential of the same name.
    std::vector<SecretHost> hosts;
};

// The secret's hosts: its own, else the catalog credential's. Empty when neither has any.
[[nodiscard]] std::vector<SecretHost> effective_hosts(const StoredSecret& secret);

// Throws agentctl::Error for a name that is not [A-Za-z0-9][A-Za-z0-9_.-]* (at most 64).
void check_secret_name(std::string_view name);
// Throws agentctl::Error (naming the secret, never showing the value) for an
// empty value or one with a line break or NUL (it goes into a header).
void check_secret_value(std::string_view name, std::string_view value);
// `text` without the line breaks (LF, CR) it ends with: a file's or a command's last newline.
[[nodiscard]] std::string without_trailing_line_breaks(std::string text);
// Throws agentctl::Error for a header name that is not an HTTP token.
void check_header_name(std::string_view header);

[[nodiscard]] std::filesystem::path secrets_dir(const std::filesystem::path& state_dir);

// Writes the secret (mode 0600), replacing one of the same name.
void save_secret(const std::filesystem::path& state_dir, const StoredSecret& secret);
// nullopt when there is none; throws agentctl::Error naming a malformed file.
[[nodiscard]] std::optional<StoredSecret> load_secret(const std::filesystem::path& state_dir, std::string_view name);
// Every secret, sorted by name.
[[nodiscard]] std::vector<StoredSecret> list_secrets(const std::filesystem::path& state_dir);
// False when there was none.
bool remove_secret(const std::filesystem::path& state_dir, std::string_view name);

// The value to inject now: the stored one, or the output of the secret's
// command (its trailing newline dropped). Throws agentctl::Error naming the
// secret and the command (never its output) when the command fails.
[[nodiscard]] std::string secret_value(const StoredSecret& secret, ProcessRunner& runner);

// Where the guest finds the sandbox CA's certificate, and the system bundle
// that holds it once installed.
inline constexpr std::string_view k_sandbox_ca_file = "/usr/local/share/ca-certificates/agentctl-sandbox.crt";
inline constexpr std::string_view k_system_ca_bundle = "/etc/ssl/certs/ca-certificates.crt";

// A guest variable that tells a runtime where the sandbox CA is (Node, Python, curl, git).
struct SandboxCaVariable {
    std::string_view name;
    std::string_view path;
};
[[nodiscard]] std::span<const SandboxCaVariable> sandbox_ca_variables();

// Why agentctl sets the guest variable `env` itself (a CA variable, or one
// ending in `_proxy`, any case); nullopt when a secret may be bound to it.
[[nodiscard]] std::optional<std::string> reserved_variable(std::string_view env);

// `create --secret NAME[=ENV]...` and the agent's credential: what the sandbox
// uses, each secret once. ENV defaults to the catalog credential's variable,
// else NAME upper-cased ('-' and '.' as '_'). The agent's credential (claude:
// anthropic, ...) is added when a secret of that name is stored. Throws
// agentctl::Error for a secret that is not stored, a bad or reserved ENV, a
// variable or secret given twice (the agent's credential included), or
// secrets on a sandbox without a network policy (nothing would inject them).
[[nodiscard]] std::vector<SecretUse> secret_uses(const std::filesystem::path& state_dir,
                                                 const std::vector<std::string>& flags, const std::string& agent,
                                                 bool network_policy);

// `secret list -o json`: names, sources and hosts; never a value.
[[nodiscard]] nlohmann::json secrets_to_json(const std::vector<StoredSecret>& secrets);
[[nodiscard]] std::string render_secret_list(const std::vector<StoredSecret>& secrets);

}  // namespace agentctl::policy
