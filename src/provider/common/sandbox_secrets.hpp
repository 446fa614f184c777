// A sandbox's secrets, whatever the provider: the record of which secrets it
// uses and their placeholders (secrets.json, 0600, in the directory of the
// sandbox's host files: Incus's host_user.hpp, Lima's lima_paths.hpp), the
// per-sandbox CA beside it (egress-ca.key 0600; the certificate is all the
// guest gets), what the guest's environment holds, the root script that puts
// the CA and that environment into the guest, and the payload its egress proxy
// reads on its stdin at each start (values fetched then: a `--from-command`
// secret's command runs at each start).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentctl/sandbox.hpp"

namespace agentctl {
class ProcessRunner;
}

namespace agentctl::provider::common {

struct SandboxSecret {
    std::string name;
    std::string env;
    std::string placeholder;  // unique to the sandbox and the secret; not secret itself
    // Where the proxy injects it, fixed at create (the profiles' forbids
    // applied); empty in a record written before bindings were recorded: the
    // stored secret's hosts.
    std::vector<SecretHost> hosts;
    std::string origin;
};

// A fresh placeholder for each secret the sandbox uses.
[[nodiscard]] std::vector<SandboxSecret> plan_sandbox_secrets(const std::vector<SecretUse>& uses);

// The record in `sandbox_dir` (written 0600); an empty list removes it.
void write_sandbox_secrets(const std::filesystem::path& sandbox_dir, const std::vector<SandboxSecret>& secrets);
// Empty when the sandbox has none. Throws agentctl::Error naming a malformed record.
[[nodiscard]] std::vector<SandboxSecret> read_sandbox_secrets(const std::filesystem::path& sandbox_dir);

// The guest's variables: each secret's placeholder, and where Node, Python and
// curl find the CA (the system bundle, which holds it once installed).
[[nodiscard]] std::map<std::string, std::string> secret_environment(const std::vector<SandboxSecret>& secrets);

// The line guest_secret_script prints last, once the CA is in the trust store.
inline constexpr std::string_view k_secrets_configured = "agentctl-secrets-configured";

// A root script for the guest: installs `ca_cert_pem` into the trust store
// (update-ca-certificates, else appended to the bundle), writes the variables
// to /etc/environment and /etc/profile.d for login shells, then checks that
// the bundle holds the certificate and prints k_secrets_configured.
[[nodiscard]] std::string guest_secret_script(const std::string& ca_cert_pem,
                                              const std::map<std::string, std::string>& environment);

// The proxy's payload (egress_proxy::SecretPayload as JSON): the CA, and each
// secret's placeholder, current value and hosts. Throws agentctl::Error naming
// a secret that is gone or whose command fails.
[[nodiscard]] std::string proxy_secret_payload(const std::filesystem::path& state_dir,
                                               const std::filesystem::path& sandbox_dir, const std::string& sandbox,
                                               ProcessRunner& runner);

// `secret set SECRET` for one sandbox whose proxy is running: nullopt when the
// sandbox does not use SECRET; else one sentence naming the sandbox: the
// proxy's answer to the new payload sent on `socket`, or, when there is no
// socket, that it gets the value at its next start. Throws agentctl::Error
// as proxy_secret_payload and egress_proxy::send_secret_rotation do.
[[nodiscard]] std::optional<std::string> rotate_sandbox_secret(const std::filesystem::path& state_dir,
                                                               const std::filesystem::path& sandbox_dir,
                                                               const std::string& sandbox, const std::string& secret,
                                                               const std::filesystem::path& socket,
                                                               ProcessRunner& runner);

}  // namespace agentctl::provider::common
