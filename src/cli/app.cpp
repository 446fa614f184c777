#include "cli/app.hpp"

#include <iostream>
#include <optional>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "agentctl/error.hpp"
#include "agentctl/provider.hpp"
#include "cli/command.hpp"
#include "cli/reporter.hpp"
#include "cli/suggest.hpp"
#include "cli/version.hpp"
#include "egress_proxy/proxy_arguments.hpp"

namespace agentctl::cli {
namespace {

void print_error(std::string_view message, std::string_view hint) {
    std::cerr << "agentctl: " << message << "\n";
    if (!hint.empty()) std::cerr << "hint: " << hint << "\n";
}

void setup_logging(const GlobalOptions& globals) {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(use_color() ? spdlog::color_mode::automatic
                                                                                  : spdlog::color_mode::never);
    auto logger = std::make_shared<spdlog::logger>("agentctl", sink);
    logger->set_pattern("agentctl [%l] %v");
    auto level = spdlog::level::warn;
    if (globals.verbose == 1) level = spdlog::level::info;
    if (globals.verbose >= 2) level = spdlog::level::debug;
    if (!globals.log_level.empty()) level = spdlog::level::from_str(globals.log_level);
    logger->set_level(level);
    spdlog::set_default_logger(logger);
}

// The deepest subcommand that was selected on the command line.
const CLI::App* deepest_selected(const CLI::App& app) {
    const CLI::App* current = &app;
    for (;;) {
        auto selected = current->get_subcommands();
        if (selected.empty()) return current;
        current = selected.front();
    }
}

std::string suggestion_for(const CLI::App& app, const std::string& extra) {
    const auto* where = deepest_selected(app);
    std::vector<std::string> candidates;
    if (!extra.empty() && extra.front() == '-') {
        for (const auto* scope = where; scope != nullptr; scope = scope->get_parent()) {
            for (const auto* option : scope->get_options()) {
                for (const auto& name : option->get_lnames()) candidates.push_back("--" + name);
            }
        }
        auto bare = extra.substr(0, extra.find('='));
        if (auto match = closest_match(bare, candidates)) return fmt::format("did you mean '{}'?", *match);
        return {};
    }
    for (const auto* sub : where->get_subcommands({})) {
        if (!sub->get_group().empty()) candidates.push_back(sub->get_name());
    }
    if (auto match = closest_match(extra, candidates)) return fmt::format("did you mean '{}'?", *match);
    return {};
}

std::string help_hint(const CLI::App& app) {
    std::string path;
    for (const auto* scope = deepest_selected(app); scope != nullptr && scope->get_parent() != nullptr;
         scope = scope->get_parent()) {
        path = scope->get_name() + (path.empty() ? "" : " " + path);
    }
    return fmt::format("run `agentctl {}{}--help` for usage", path, path.empty() ? "" : " ");
}

// An unknown word or flag: say which, and suggest the closest real one.
int report_unknown(const CLI::App& app) {
    const auto* where = deepest_selected(app);
    auto extras = where->remaining();
    if (extras.empty()) extras = app.remaining();
    const std::string first = extras.empty() ? std::string() : extras.front();
    const bool is_flag = !first.empty() && first.front() == '-';
    auto suggestion = suggestion_for(app, first);
    print_error(fmt::format("unknown {} '{}'", is_flag ? "flag" : "command or argument", first),
                suggestion.empty() ? help_hint(app) : suggestion);
    return exit_code::k_error;
}

// The options every command takes, in the order --help lists them.
void add_global_options(CLI::App& app, GlobalOptions& globals) {
    app.set_version_flag("--version", std::string("agentctl ") + k_version);
    app.require_subcommand(0, 1);
    app.fallthrough();
    std::vector<std::string> names;
    for (const auto& entry : providers()) names.emplace_back(entry.name);
    app.add_option("--provider", globals.provider, "Backend to use: " + provider_names(", ") + " (default: config)")
        ->check(CLI::IsMember(names));
    if (const auto* remotes = remote_provider()) {
        app.add_option("--remote", globals.remote,
                       fmt::format("{}: the {} client's remote to use ({} remote list) instead of the local daemon "
                                   "(default: config {})",
                                   remotes->title, remotes->name, remotes->name, remotes->remote_setting))
            ->check([setting = find_config_key(remotes->remote_setting)](const std::string& value) {
                const auto problem = setting->validate(value);
                return problem.empty() ? std::string() : "--remote " + problem;
            });
        app.add_option("--project", globals.project,
                       fmt::format("{}: the {} project that holds the sandboxes (default: config {})", remotes->title,
                                   remotes->name, remotes->project_setting))
            ->check([setting = find_config_key(remotes->project_setting)](const std::string& value) {
                const auto problem = setting->validate(value);
                return problem.empty() ? std::string() : "--project " + problem;
            });
    }
    app.add_option("--output,-o,--format", globals.output, "Output format: table or json")
        ->check(CLI::IsMember({"table", "json"}));
    app.add_option("--profile-dir", globals.profile_dir, "Organisation profile directory (overrides profileDir)")
        ->type_name(value_type::k_dir);
    app.add_flag("--force-partial", globals.force_partial,
                 "Proceed where a feature needs manual steps (ManualWorkaround)");
    app.add_flag("--preview,--dry-run", globals.preview, "Print the backend commands that would run; change nothing");
    app.add_option("--log-level", globals.log_level, "Log level: trace, debug, info, warn, error, off")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
    app.add_flag("-v,--verbose", globals.verbose, "More log output (repeat for debug)");
    app.footer(
        "\nExamples:\n"
        "  agentctl config set provider=incus\n"
        "  agentctl create demo --isolation container --allow api.github.com:443\n"
        "  agentctl exec demo -- whoami\n"
        "  agentctl status demo\n"
        "  agentctl delete -f demo\n"
        "\nRun `agentctl help COMMAND` (or `agentctl COMMAND --help`) for a command's flags and examples.");
}

// Parses the command line; an exit code when that already ended the run
// (--help, --version, or a parse error, reported here).
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ExtrasError&) {
        return report_unknown(app);
    } catch (const CLI::ParseError& e) {
        // "A subcommand is required" with words left over means the word was not a command.
        if (!deepest_selected(app)->remaining().empty() || !app.remaining().empty()) return report_unknown(app);
        print_error(e.what(), help_hint(app));
        return exit_code::k_error;
    } catch (const Error& e) {
        print_error(e.what(), e.hint());
        return e.code();
    }
    return std::nullopt;
}

// Runs the chosen command, with the one catch that prints what went wrong.
int run_action(const Action& action, Session& session) {
    try {
        const int code = action();
        session.finish();
        return code;
    } catch (const Error& e) {
        session.fail_step();
        print_error(e.what(), e.hint());
        return e.code();
    } catch (const std::exception& e) {
        session.fail_step();
        print_error(fmt::format("internal error: {}", e.what()), "please report this with the command you ran");
        return exit_code::k_error;
    }
}

}  // namespace

int run(int argc, char** argv) {
    GlobalOptions globals;
    Action action;
    CLI::App app{"agentctl runs AI coding agents inside virtual machines, with default-deny network egress.",
                 "agentctl"};
    add_global_options(app, globals);

    Session session(globals);
    CommandEnv env{session, action};
    // The hidden egress-proxy verb is agentctl re-run by itself as a sandbox's
    // proxy, where start-up time is the time until the sandbox has network. It
    // comes first on that command line, so only its entry is built; every
    // other command line gets the whole table.
    const bool proxy_only = argc > 1 && std::string_view(argv[1]) == egress_proxy::k_verb;
    for (const auto& entry : commands()) {
        if (!proxy_only || entry.name == egress_proxy::k_verb) entry.add(app, env);
    }
    if (auto ended = parse_command_line(app, argc, argv)) return *ended;

    setup_logging(globals);
    if (!action) {
        // `agentctl` alone: the overview, as incus, gh and docker print.
        std::cout << app.help();
        return exit_code::k_ok;
    }
    return run_action(action, session);
}

}  // namespace agentctl::cli
