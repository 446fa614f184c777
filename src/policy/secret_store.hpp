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

// `secrets.bind[i]`, or one `create --secret NAME[=ENV]`: a secret the
// sandbox uses, its guest variable (empty: the default) and the hosts it goes
// to (empty: the secret's own, else the catalog's).
struct SecretBinding {
    std::string name;
    std::string env;
    std::vector<SecretHost> hosts;
    std::string origin;  // "--secret", "profile team (FILE:LINE), spec.secrets.bind[0]"
};

// `secrets.forbid[i]`: secret `secret` ("*": every secret) never goes to `host`.
struct SecretForbid {
    std::string secret;
    std::string host;  // lower case
    std::string origin;
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
// Whether `header` is an HTTP header name (a token).
[[nodiscard]] bool is_header_name(std::string_view header);
// Throws agentctl::Error for a header name that is not an HTTP token.
void check_header_name(std::string_view header);
// Whether `host` can carry a secret: a host name, no port, path or space.
[[nodiscard]] bool is_secret_host(std::string_view host);

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

// Why the guest variable `env` cannot hold a secret's placeholder: not a
// variable name, or one agentctl sets itself (a CA variable, or one ending in
// `_proxy`, any case); nullopt when it can.
[[nodiscard]] std::optional<std::string> variable_problem(std::string_view env);

// `create --secret NAME[=ENV]` as a binding. Throws agentctl::Error for a bad name.
[[nodiscard]] SecretBinding parse_secret_flag(const std::string& flag);

// The secrets a sandbox uses: `bindings` (the profiles', then the flags'),
// then the agent's credential (claude: anthropic, ...) when a secret of that
// name is stored and not bound already. ENV defaults to the catalog
// credential's variable, else NAME upper-cased ('-' and '.' as '_'); hosts to
// the secret's own, else the catalog's; then every host a forbid names is
// taken out (each one a sentence in `notices`). Throws agentctl::Error naming
// the binding's origin for a secret that is not stored, a bad or reserved
// variable, a secret or variable bound twice (the agent's credential
// included), a secret left with no host, or secrets on a sandbox without a
// network policy (nothing would inject them).
[[nodiscard]] std::vector<SecretUse> secret_uses(const std::filesystem::path& state_dir,
                                                 const std::vector<SecretBinding>& bindings,
                                                 const std::vector<SecretForbid>& forbids, const std::string& agent,
                                                 bool network_policy, std::vector<std::string>* notices = nullptr);

// One line per secret for `create` and `status`: variable, hosts and origin, never a value.
[[nodiscard]] std::string describe_secret_use(const SecretUse& use);

// `secret list -o json`: names, sources and hosts; never a value.
[[nodiscard]] nlohmann::json secrets_to_json(const std::vector<StoredSecret>& secrets);
[[nodiscard]] std::string render_secret_list(const std::vector<StoredSecret>& secrets);

}  // namespace agentctl::policy
