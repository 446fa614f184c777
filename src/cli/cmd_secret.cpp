// secret set|list|rm: secrets kept on the host, injected by the egress proxy.
#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "cli/commands_list.hpp"
#include "core/files.hpp"
#include "policy/addresses.hpp"
#include "policy/catalog.hpp"
#include "policy/secret_store.hpp"

namespace agentctl::cli {
namespace {

struct SetOptions {
    std::string name;
    std::string from_env;
    std::string from_file;
    std::string from_command;
    std::vector<std::string> hosts;
    std::string header;
};

// The value typed or piped in: all of stdin, one trailing line break dropped.
// On a terminal it is read without echo, one line.
std::string read_stdin_value(const std::string& name) {
    std::string value;
    if (::isatty(STDIN_FILENO) == 1) {
        std::cerr << fmt::format("value of secret {} (not shown): ", name) << std::flush;
        termios saved{};
        const bool terminal = ::tcgetattr(STDIN_FILENO, &saved) == 0;
        if (terminal) {
            termios quiet = saved;
            quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
            ::tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
        }
        std::getline(std::cin, value);
        if (terminal) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
        std::cerr << "\n";
    } else {
        value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    if (!value.empty() && value.back() == '\n') value.pop_back();
    if (!value.empty() && value.back() == '\r') value.pop_back();
    return value;
}

policy::StoredSecret build_secret(const SetOptions& options) {
    policy::check_secret_name(options.name);
    policy::StoredSecret secret;
    secret.name = options.name;
    if (!options.from_env.empty()) {
        const char* value = std::getenv(options.from_env.c_str());
        if (value == nullptr) {
            throw Error(fmt::format("--from-env {}: the variable is not set", options.from_env),
                        fmt::format("export {} first, or pass the value on stdin", options.from_env));
        }
        secret.source = policy::SecretSource::Env;
        secret.value = value;
        secret.from = options.from_env;
    } else if (!options.from_file.empty()) {
        secret.source = policy::SecretSource::File;
        secret.value = policy::without_trailing_line_breaks(core::read_file(options.from_file));
        secret.from = options.from_file;
    } else if (!options.from_command.empty()) {
        secret.source = policy::SecretSource::Command;
        secret.from = options.from_command;
    } else {
        secret.value = read_stdin_value(options.name);
    }
    if (secret.source != policy::SecretSource::Command) policy::check_secret_value(secret.name, secret.value);
    policy::check_header_name(options.header.empty() ? "authorization" : options.header);
    const auto header = policy::ascii_lower(options.header.empty() ? "authorization" : options.header);
    for (const auto& host : options.hosts) {
        if (!policy::is_secret_host(host)) {
            throw Error(fmt::format("--host \"{}\": expected a host name, such as api.example.com", host),
                        "the secret is injected on port 443 of that host");
        }
        secret.hosts.push_back({host, header});
    }
    if (!options.header.empty() && options.hosts.empty())
        throw Error("--header needs --host: it says where on those hosts the secret goes", "add --host HOST");
    if (policy::effective_hosts(secret).empty()) {
        std::string known;
        for (const auto& credential : policy::credentials())
            known += fmt::format("{}{}", known.empty() ? "" : ", ", credential.name);
        throw Error(fmt::format("secret {}: no host to inject it into", secret.name),
                    fmt::format("pass --host HOST (and --header NAME), or use a name the catalog knows: {}", known));
    }
    return secret;
}

}  // namespace

void add_secret(CLI::App& app, CommandEnv& env) {
    auto* group = app.add_subcommand("secret", "Keep secrets on the host; sandboxes see only a placeholder");
    group->require_subcommand(1);

    auto options = std::make_shared<SetOptions>();
    auto* set =
        group->add_subcommand("set", "Store a secret (value on stdin, or --from-env/--from-file/--from-command)");
    set->add_option("NAME", options->name, "Secret name (a catalog name such as github brings its hosts)")->required();
    auto* env_option = set->add_option("--from-env", options->from_env, "Copy the value of this environment variable");
    auto* file_option = set->add_option("--from-file", options->from_file, "Copy the value from this file")
                            ->type_name(value_type::k_file);
    auto* command_option = set->add_option("--from-command", options->from_command,
                                           "Run this command (sh -c) at each sandbox start; its output is the value");
    env_option->excludes(file_option)->excludes(command_option);
    file_option->excludes(command_option);
    set->add_option("--host", options->hosts, "Inject it into requests to this host (repeatable; port 443)");
    set->add_option("--header", options->header, "The request header it goes in (default: authorization)");
    set_examples(*set, {"printf %s \"$ANTHROPIC_API_KEY\" | agentctl secret set anthropic",
                        "agentctl secret set github --from-command 'gh auth token'",
                        "agentctl secret set internal --from-env TOKEN --host api.example.com --header x-api-key"});
    set->callback([&env, options] {
        env.action = [&env, options] {
            auto secret = build_secret(*options);
            const auto& state = env.session.state_dir();
            if (env.session.globals().preview) {
                env.session.out() << fmt::format("would store secret {} ({}) in {}\n", secret.name,
                                                 policy::to_string(secret.source), policy::secrets_dir(state).string());
                return 0;
            }
            policy::save_secret(state, secret);
            env.session.reporter().notice(fmt::format("secret {} stored", secret.name));
            // Running sandboxes that use it get the new value now (a command secret: its output now).
            try {
                for (const auto& line : env.session.lifecycle().refresh_secret(secret.name))
                    env.session.reporter().notice(line);
            } catch (const Error& e) {
                env.session.reporter().warning(fmt::format(
                    "running sandboxes that use secret {} were not given the new value ({}); they get it at their "
                    "next start",
                    secret.name, e.what()));
            }
            return 0;
        };
    });

    auto* list = group->add_subcommand("list", "List the secrets: names, sources and hosts, never values");
    set_examples(*list, {"agentctl secret list", "agentctl secret list --output json"});
    list->callback([&env] {
        env.action = [&env] {
            const auto secrets = policy::list_secrets(env.session.state_dir());
            env.session.print_result([&] { return policy::secrets_to_json(secrets); },
                                     [&] { return policy::render_secret_list(secrets); });
            return 0;
        };
    });

    auto rm_name = std::make_shared<std::string>();
    auto* rm = group->add_subcommand("rm", "Remove a secret");
    rm->add_option("NAME", *rm_name, "Secret name")->required();
    set_examples(*rm, {"agentctl secret rm github"});
    rm->callback([&env, rm_name] {
        env.action = [&env, rm_name] {
            if (env.session.globals().preview) {
                env.session.out() << fmt::format("would remove secret {}\n", *rm_name);
                return 0;
            }
            if (!policy::remove_secret(env.session.state_dir(), *rm_name)) {
                throw Error(fmt::format("no secret named {}", *rm_name), "agentctl secret list shows the secrets");
            }
            env.session.reporter().notice(fmt::format("secret {} removed", *rm_name));
            return 0;
        };
    });
}

}  // namespace agentctl::cli
