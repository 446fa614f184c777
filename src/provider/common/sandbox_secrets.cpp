#include "provider/common/sandbox_secrets.hpp"

#include <algorithm>

#include <sys/random.h>  // getentropy on macOS
#include <unistd.h>      // getentropy on Linux

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "core/files.hpp"
#include "egress_proxy/sandbox_ca.hpp"
#include "egress_proxy/secret_injection.hpp"
#include "egress_proxy/secret_rotation.hpp"
#include "policy/secret_store.hpp"
#include "provider/common/guest_environment.hpp"

namespace agentctl::provider::common {
namespace {

namespace fs = std::filesystem;

fs::path record_file(const fs::path& sandbox_dir) { return sandbox_dir / "secrets.json"; }

std::string random_hex(std::size_t bytes) {
    std::string raw(bytes, '\0');
    if (::getentropy(raw.data(), raw.size()) != 0)
        throw Error("cannot draw random bytes for a secret's placeholder", "");
    std::string hex;
    for (unsigned char c : raw) hex += fmt::format("{:02x}", c);
    return hex;
}

}  // namespace

std::vector<SandboxSecret> plan_sandbox_secrets(const std::vector<SecretUse>& uses) {
    std::vector<SandboxSecret> secrets;
    for (const auto& use : uses)
        secrets.push_back(
            {use.name, use.env, fmt::format("agentctl-secret-{}-{}", use.name, random_hex(16)), use.hosts, use.origin});
    return secrets;
}

void write_sandbox_secrets(const fs::path& sandbox_dir, const std::vector<SandboxSecret>& secrets) {
    if (secrets.empty()) {
        std::error_code ec;
        fs::remove(record_file(sandbox_dir), ec);
        return;
    }
    auto list = nlohmann::json::array();
    for (const auto& secret : secrets) {
        auto hosts = nlohmann::json::array();
        for (const auto& host : secret.hosts) hosts.push_back({{"host", host.host}, {"header", host.header}});
        list.push_back({{"name", secret.name},
                        {"env", secret.env},
                        {"placeholder", secret.placeholder},
                        {"hosts", std::move(hosts)},
                        {"origin", secret.origin}});
    }
    core::write_file_atomic(record_file(sandbox_dir), list.dump(2) + "\n", 0600);
}

std::vector<SandboxSecret> read_sandbox_secrets(const fs::path& sandbox_dir) {
    const auto file = record_file(sandbox_dir);
    const auto text = core::read_file_if_exists(file);
    std::vector<SandboxSecret> secrets;
    if (!text) return secrets;
    auto list = nlohmann::json::parse(*text, nullptr, false);
    if (!list.is_array()) throw Error(fmt::format("{}: not a JSON list", file.string()), "recreate the sandbox");
    for (std::size_t i = 0; i < list.size(); ++i) {
        const auto& entry = list[i];
        for (const char* field : {"name", "env", "placeholder"}) {
            if (!entry.contains(field) || !entry[field].is_string())
                throw Error(fmt::format("{}: field `[{}].{}` is missing", file.string(), i, field),
                            "recreate the sandbox");
        }
        SandboxSecret secret{entry["name"], entry["env"], entry["placeholder"], {}, entry.value("origin", "")};
        for (const auto& host : entry.value("hosts", nlohmann::json::array())) {
            if (!host.is_object() || !host.contains("host") || !host["host"].is_string() || !host.contains("header") ||
                !host["header"].is_string())
                throw Error(fmt::format("{}: field `[{}].hosts` is malformed", file.string(), i),
                            "recreate the sandbox");
            secret.hosts.push_back({host["host"], host["header"]});
        }
        secrets.push_back(std::move(secret));
    }
    return secrets;
}

std::map<std::string, std::string> secret_environment(const std::vector<SandboxSecret>& secrets) {
    std::map<std::string, std::string> environment;
    if (secrets.empty()) return environment;
    for (const auto& secret : secrets) environment[secret.env] = secret.placeholder;
    for (const auto& variable : policy::sandbox_ca_variables())
        environment[std::string(variable.name)] = std::string(variable.path);
    return environment;
}

std::string guest_secret_script(const std::string& ca_cert_pem, const std::map<std::string, std::string>& environment) {
    return fmt::format(
        R"SH(set -eu
umask 022
mkdir -p "$(dirname {ca})"
printf '%s' {pem} >{ca}
# The trust store: Debian's tool when it works, else the bundle directly.
if ! {{ command -v update-ca-certificates >/dev/null 2>&1 && update-ca-certificates >/dev/null; }}; then
  mkdir -p "$(dirname {bundle})"; cat {ca} >>{bundle}
fi
{environment}# Proof that it landed: the bundle the variables name holds the certificate.
if ! grep -qF "$(sed -n 2p {ca})" {bundle}; then
  echo "agentctl: the sandbox CA is not in "{bundle} >&2; exit 1
fi
echo {done}
)SH",
        fmt::arg("ca", shell_quote(std::string(policy::k_sandbox_ca_file))), fmt::arg("pem", shell_quote(ca_cert_pem)),
        fmt::arg("bundle", shell_quote(std::string(policy::k_system_ca_bundle))),
        fmt::arg("done", k_secrets_configured),
        fmt::arg("environment",
                 environment_files_script("# agentctl secrets", "/etc/profile.d/agentctl-secrets.sh", environment)));
}

std::string proxy_secret_payload(const fs::path& state_dir, const fs::path& sandbox_dir, const std::string& sandbox,
                                 ProcessRunner& runner) {
    const auto secrets = read_sandbox_secrets(sandbox_dir);
    if (secrets.empty()) return {};
    const auto ca = egress_proxy::load_or_make_sandbox_ca(sandbox_dir, sandbox);
    egress_proxy::SecretPayload payload{ca.cert, ca.key, {}};
    for (const auto& secret : secrets) {
        const auto stored = policy::load_secret(state_dir, secret.name);
        if (!stored) {
            throw Error(fmt::format("sandbox {} uses secret {}, which is no longer stored", sandbox, secret.name),
                        fmt::format("store it again: agentctl secret set {}", secret.name));
        }
        egress_proxy::InjectedSecret injected{
            secret.name, secret.placeholder, policy::secret_value(*stored, runner), {}};
        injected.bindings = secret.hosts.empty() ? policy::effective_hosts(*stored) : secret.hosts;
        payload.secrets.push_back(std::move(injected));
    }
    return egress_proxy::secret_payload_json(payload);
}

std::optional<std::string> rotate_sandbox_secret(const fs::path& state_dir, const fs::path& sandbox_dir,
                                                 const std::string& sandbox, const std::string& secret,
                                                 const fs::path& socket, ProcessRunner& runner) {
    const auto records = read_sandbox_secrets(sandbox_dir);
    if (std::none_of(records.begin(), records.end(), [&](const auto& r) { return r.name == secret; }))
        return std::nullopt;
    if (!fs::exists(socket)) {
        return fmt::format(
            "{}: its egress proxy takes no new values while it runs; it gets the new value at its next start", sandbox);
    }
    const auto payload = proxy_secret_payload(state_dir, sandbox_dir, sandbox, runner);
    return fmt::format("{}: {}", sandbox, egress_proxy::send_secret_rotation(socket.string(), payload));
}

}  // namespace agentctl::provider::common
