// Which secrets a sandbox uses, in which guest variable, injected where: the
// profiles' bindings and forbids, `create --secret`, and the agent's credential.
#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "policy/addresses.hpp"
#include "policy/catalog.hpp"
#include "policy/secret_store.hpp"

namespace agentctl::policy {
namespace {

namespace fs = std::filesystem;

// The catalog credential's variable, else NAME upper-cased ('-' and '.' as '_').
std::string default_variable(const std::string& name) {
    const auto* credential = find_credential(name);
    std::string env = credential != nullptr ? std::string(credential->env) : name;
    for (auto& c : env) c = c == '-' || c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return env;
}

bool forbids(const SecretForbid& forbid, const std::string& secret, const std::string& host) {
    return (forbid.secret == "*" || forbid.secret == secret) && forbid.host == ascii_lower(host);
}

// Takes the forbidden hosts out of `use`; throws when none is left.
void apply_forbids(SecretUse& use, const std::vector<SecretForbid>& forbid_list, std::vector<std::string>* notices) {
    std::vector<std::string> refusals;
    std::erase_if(use.hosts, [&](const SecretHost& host) {
        for (const auto& forbid : forbid_list) {
            if (!forbids(forbid, use.name, host.host)) continue;
            refusals.push_back(fmt::format("{} forbids it on {}", forbid.origin, host.host));
            if (notices != nullptr) {
                notices->push_back(fmt::format("secret {} is not injected into {}: {} forbids it", use.name, host.host,
                                               forbid.origin));
            }
            return true;
        }
        return false;
    });
    if (use.hosts.empty()) {
        std::string why;
        for (const auto& refusal : refusals) why += (why.empty() ? "" : "; ") + refusal;
        throw Error(fmt::format("{}: secret {} has no host left to go to ({})", use.origin, use.name,
                                why.empty() ? "it names none" : why),
                    "a forbid cannot be lifted by a later profile or a flag: bind the secret to another host, or "
                    "leave it out");
    }
}

}  // namespace

std::span<const SandboxCaVariable> sandbox_ca_variables() {
    static constexpr std::array<SandboxCaVariable, 5> k_variables{{
        {"NODE_EXTRA_CA_CERTS", k_sandbox_ca_file},
        {"SSL_CERT_FILE", k_system_ca_bundle},
        {"REQUESTS_CA_BUNDLE", k_system_ca_bundle},
        {"CURL_CA_BUNDLE", k_system_ca_bundle},
        {"GIT_SSL_CAINFO", k_system_ca_bundle},
    }};
    return k_variables;
}

std::optional<std::string> variable_problem(std::string_view env) {
    const bool name_ok = !env.empty() && !(env.front() >= '0' && env.front() <= '9') &&
                         std::all_of(env.begin(), env.end(),
                                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!name_ok) return fmt::format("\"{}\" is not an environment variable name", env);
    for (const auto& variable : sandbox_ca_variables()) {
        if (variable.name == env)
            return fmt::format("agentctl sets {} in the sandbox itself (where programs find the sandbox CA: {})", env,
                               variable.path);
    }
    constexpr std::string_view k_proxy = "_proxy";
    if (env.size() >= k_proxy.size() && ascii_lower(env.substr(env.size() - k_proxy.size())) == k_proxy)
        return fmt::format("agentctl sets {} in the sandbox itself (it points programs at the egress proxy)", env);
    return std::nullopt;
}

SecretBinding parse_secret_flag(const std::string& flag) {
    const auto eq = flag.find('=');
    SecretBinding binding{
        flag.substr(0, eq), eq == std::string::npos ? std::string() : flag.substr(eq + 1), {}, "--secret " + flag};
    check_secret_name(binding.name);
    if (eq != std::string::npos && binding.env.empty()) {
        throw Error(fmt::format("--secret {}: the variable after '=' is empty", flag),
                    "write --secret NAME=VARIABLE, e.g. --secret github=GH_TOKEN, or just --secret NAME");
    }
    return binding;
}

std::vector<SecretUse> secret_uses(const fs::path& state_dir, const std::vector<SecretBinding>& bindings,
                                   const std::vector<SecretForbid>& forbid_list, const std::string& agent,
                                   bool network_policy, std::vector<std::string>* notices) {
    std::vector<SecretUse> uses;
    const auto check_variable_free = [&](const SecretUse& use) {
        for (const auto& known : uses) {
            if (known.env != use.env) continue;
            throw Error(fmt::format("{}: the variable {} already holds secret {} ({})", use.origin, use.env, known.name,
                                    known.origin),
                        "one secret per variable: drop one of the two, or bind one to another variable");
        }
    };
    for (const auto& binding : bindings) {
        check_secret_name(binding.name);
        for (const auto& known : uses) {
            if (known.name != binding.name) continue;
            throw Error(fmt::format("{}: secret {} is already bound by {}", binding.origin, binding.name, known.origin),
                        "bind each secret once: drop one of the two");
        }
        const auto stored = load_secret(state_dir, binding.name);
        if (!stored) {
            throw Error(fmt::format("{}: no secret named {} is stored", binding.origin, binding.name),
                        fmt::format("store it first: agentctl secret set {}", binding.name));
        }
        SecretUse use{binding.name, binding.env.empty() ? default_variable(binding.name) : binding.env,
                      binding.hosts.empty() ? effective_hosts(*stored) : binding.hosts, binding.origin};
        if (const auto problem = variable_problem(use.env)) {
            throw Error(fmt::format("{}: {}", binding.origin, *problem),
                        "bind the secret to another variable, e.g. --secret github=GH_TOKEN");
        }
        check_variable_free(use);
        uses.push_back(std::move(use));
    }
    if (const auto* credential = agent.empty() ? nullptr : credential_for_agent(agent)) {
        const bool listed =
            std::any_of(uses.begin(), uses.end(), [&](const auto& u) { return u.name == credential->name; });
        const auto stored = listed ? std::nullopt : load_secret(state_dir, credential->name);
        if (stored) {
            for (const auto& use : uses) {
                if (use.env != credential->env) continue;
                throw Error(fmt::format("{}: --agent {} already puts its stored secret {} in {}", use.origin, agent,
                                        credential->name, use.env),
                            fmt::format("one secret per variable: drop that binding, or bind {} elsewhere "
                                        "(--secret {}=ANOTHER_VARIABLE)",
                                        credential->name, credential->name));
            }
            uses.push_back({std::string(credential->name), std::string(credential->env), effective_hosts(*stored),
                            "agent " + agent});
        }
    }
    if (!uses.empty() && !network_policy) {
        throw Error(
            "--secret needs the egress proxy, and --no-network-policy has none: the secret could not be injected",
            "drop --no-network-policy, or hand the sandbox no secret");
    }
    for (auto& use : uses) apply_forbids(use, forbid_list, notices);
    return uses;
}

std::string describe_secret_use(const SecretUse& use) {
    std::string hosts;
    for (const auto& host : use.hosts)
        hosts += fmt::format("{}{} ({})", hosts.empty() ? "" : ", ", host.host, host.header);
    return fmt::format("{} in {}, injected into {}; from {}", use.name, use.env,
                       hosts.empty() ? "the secret's own hosts" : hosts, use.origin.empty() ? "create" : use.origin);
}

}  // namespace agentctl::policy
