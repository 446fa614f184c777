// policy check|add|remove|budget: ask what the egress policy would do, and
// change a sandbox's allowlist and upload budgets while it runs.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "core/utc_time.hpp"
#include "cli/commands_list.hpp"
#include "cli/output.hpp"
#include "cli/sandbox_options.hpp"
#include "egress_proxy/log_query.hpp"
#include "policy/check.hpp"

namespace agentctl::cli {
namespace {

struct CheckArgs {
    std::vector<std::string> positional;  // [NAME] HOST[:PORT]
    CreateOptions policy;                 // create's policy flags
};

bool any_policy_flag(const CreateOptions& o) {
    return !o.profiles.empty() || !o.allow.empty() || !o.allow_files.empty() || !o.allow_presets.empty() ||
           o.allow_lan || o.deny_lan || o.no_network_policy || !o.agent.empty();
}

// Which provider enforces the policy, and how, for the answer.
std::string enforcement(Session& session) {
    const ProviderEntry* chosen = nullptr;
    try {
        chosen = &session.provider_entry();
    } catch (const Error&) {
        return "no provider chosen (--provider or `agentctl config set provider=...`): this is the policy's answer";
    }
    const auto& entry = *chosen;
    auto acl = session.capabilities().get("network.acl");
    std::string text = fmt::format("{}: {}", entry.name, entry.egress);
    if (acl.status != CapabilityStatus::Supported) {
        text += fmt::format(" (network.acl is {} here: {})", to_string(acl.status), acl.message);
    }
    return text;
}

int run_check(Session& session, const CheckArgs& args) {
    policy::NetworkPolicy network;
    std::string destination;
    if (args.positional.size() == 2) {
        if (any_policy_flag(args.policy)) {
            throw Error("give either a sandbox NAME or policy flags (--profile, --allow, --agent, ...), not both",
                        "agentctl policy check demo example.com:443");
        }
        validate_instance_name(args.positional[0]);
        session.gate("status");
        auto info = session.lifecycle().status(args.positional[0]);
        if (!info.network) throw Error(fmt::format("the network policy of {} is not known", args.positional[0]));
        network = *info.network;
        destination = args.positional[1];
    } else if (args.positional.size() == 1) {
        network = build_network_policy(session, args.policy);
        destination = args.positional[0];
    } else {
        throw Error("expected [NAME] HOST[:PORT]", "agentctl policy check --allow example.com example.com:443");
    }
    auto resolver = policy::make_system_resolver();
    const auto own = policy::host_own_addresses();
    auto routes = policy::make_kernel_route_table();
    auto result = policy::check_destination(network, destination, *resolver, own, routes.get());
    result.enforced_by = enforcement(session);
    if (session.json()) {
        session.out() << policy::check_to_json(result).dump(2) << "\n";
    } else {
        session.out() << policy::render_check_table(result);
    }
    return policy::check_exit_code(result);
}

struct ChangeArgs {
    std::string name;
    std::vector<std::string> entries;
    std::string duration;  // policy add --for DURATION: the grants end then
};

// The time a grant of `--for DURATION` given now ends (seconds since the epoch).
// A grant's end is kept by the proxy, so an address (which the provider's
// firewall admits directly, without the proxy) cannot have one.
std::int64_t grant_end(const ChangeArgs& args, const std::vector<policy::AllowRule>& rules) {
    const auto seconds = policy::parse_grant_duration(args.duration);
    for (const auto& rule : rules) {
        if (rule.kind != policy::HostKind::Ip) continue;
        throw Error(fmt::format("{} is an address: a grant with --for is for host names, whose connections the egress "
                                "proxy ends on time",
                                rule.entry()),
                    fmt::format("allow it for good (`agentctl policy add {} {}`) and remove it later", args.name,
                                rule.entry()));
    }
    const auto now = core::epoch_seconds_now();
    return now + seconds;
}

// An address added to the allowlist that the policy would still refuse (a LAN
// address under deny-LAN, loopback, the host's own addresses, reserved
// ranges) is refused, as `policy check` refuses it, with its exit code (4):
// the entry would change nothing. Names are decided when they are dialled
// (by the addresses they resolve to then), so only addresses are checked here.
void refuse_still_refused(const std::string& name, const policy::NetworkPolicy& network,
                          const std::vector<policy::AllowRule>& rules) {
    const auto own = policy::host_own_addresses();
    auto resolver = policy::make_system_resolver();  // not asked: only addresses are checked
    for (const auto& rule : rules) {
        if (rule.kind != policy::HostKind::Ip) continue;
        const bool v6 = rule.host.find(':') != std::string::npos;
        const auto destination =
            fmt::format("{}:{}", v6 ? "[" + rule.host + "]" : rule.host, rule.ports.empty() ? 443 : rule.ports.front());
        const auto result = policy::check_destination(network, destination, *resolver, own);
        if (policy::check_exit_code(result) != exit_code::k_policy_refused) continue;
        throw Error(fmt::format("{} would still be refused in {} ({}): {}; nothing was changed", rule.entry(), name,
                                policy::to_string(result.reason), result.detail),
                    result.reason == policy::Reason::Lan
                        ? fmt::format("{} denies the LAN; a sandbox created with --allow-lan may reach it", name)
                        : fmt::format("`agentctl policy check {} {}` explains the decision", name, destination),
                    exit_code::k_policy_refused);
    }
}

// The policy a live change starts from, with the sandbox locked. Read even in
// a preview (reading changes nothing): the request carries the whole new policy.
policy::NetworkPolicy policy_to_change(Session& session, const std::string& name) {
    session.gate("network.acl");
    session.lock_instance(name);
    auto info = session.lifecycle().status(name);
    if (!info.network) throw Error(fmt::format("the network policy of {} is not known", name));
    if (!info.network->enabled) {
        throw Error(fmt::format("{} was created with --no-network-policy: it has no policy to change", name),
                    "recreate it without --no-network-policy");
    }
    return *info.network;
}

// Adds or removes entries, then hands the whole new policy to the provider.
int run_change(Session& session, const ChangeArgs& args, bool add) {
    validate_instance_name(args.name);
    std::vector<policy::AllowRule> rules;
    for (const auto& entry : args.entries) rules.push_back(policy::parse_allow_entry(entry, "policy add"));
    if (!args.duration.empty()) {
        const auto ends = grant_end(args, rules);
        for (auto& rule : rules) rule.expires = ends;
    }
    policy::NetworkPolicy network = policy_to_change(session, args.name);
    auto same = [](const policy::AllowRule& a, const policy::AllowRule& b) { return a.entry() == b.entry(); };
    for (const auto& rule : rules) {
        auto it =
            std::find_if(network.allow.begin(), network.allow.end(), [&](const auto& r) { return same(r, rule); });
        if (add) {
            if (it == network.allow.end()) {
                network.allow.push_back(rule);
            } else if (it->expires != 0) {
                it->expires = rule.expires;  // a grant given again ends when the new one says (never, without --for)
            } else {
                session.reporter().notice(fmt::format("{} is already allowed (from {})", rule.entry(), it->origin));
            }
        } else if (it == network.allow.end()) {
            throw Error(fmt::format("{} is not on the allowlist of {}", rule.entry(), args.name),
                        fmt::format("`agentctl status {}` lists the allow entries", args.name));
        } else {
            network.allow.erase(it);
        }
    }
    if (add) refuse_still_refused(args.name, network, rules);
    session.egress_policy().apply_network_policy(args.name, network);
    if (!session.globals().preview) {
        for (const auto& rule : rules) {
            session.reporter().notice(fmt::format(
                "{} {} {}{}", add ? "allowed" : "removed", rule.entry(), add ? "in " + args.name : "from " + args.name,
                rule.expires != 0 ? " until " + utc_time(rule.expires) + " (--for " + args.duration + ")"
                                  : std::string()));
        }
    }
    return 0;
}

// Sets (or with SIZE `none` lifts) upload budgets, then hands the whole new policy to the provider.
int run_budget(Session& session, const ChangeArgs& args) {
    validate_instance_name(args.name);
    std::vector<policy::UploadBudget> budgets;
    for (const auto& entry : args.entries) budgets.push_back(policy::parse_budget_entry(entry));
    policy::NetworkPolicy network = policy_to_change(session, args.name);
    for (const auto& budget : budgets) {
        std::erase_if(network.budgets,
                      [&](const policy::UploadBudget& b) { return b.host == budget.host && b.port == budget.port; });
        if (budget.bytes > 0) network.budgets.push_back(budget);
    }
    session.egress_policy().apply_network_policy(args.name, network);
    if (!session.globals().preview) {
        for (const auto& budget : budgets) {
            const auto destination = policy::destination_text(budget.host, budget.port);
            session.reporter().notice(
                budget.bytes > 0 ? fmt::format("{} may send {} bytes to {}", args.name, budget.bytes, destination)
                                 : fmt::format("lifted the upload budget of {} in {}", destination, args.name));
        }
    }
    return 0;
}

struct ProposeArgs {
    std::string name;
    std::string form = "allow-file";
    std::string since;
    bool wildcards = false;
};

int run_propose(Session& session, const ProposeArgs& args) {
    validate_instance_name(args.name);
    LogRequest request;
    request.proposal = args.form == "profile" ? LogRequest::Proposal::Profile : LogRequest::Proposal::AllowFile;
    request.wildcards = args.wildcards;
    request.sandbox = args.name;
    if (!args.since.empty()) request.since = egress_proxy::parse_since(args.since, std::chrono::system_clock::now());
    session.gate("logs.network");
    return session.egress_log().logs(args.name, request);
}

}  // namespace

void add_policy(CLI::App& app, CommandEnv& env) {
    auto* group = app.add_subcommand("policy", "Check and change what a sandbox may reach");
    group->require_subcommand(1);

    auto check_args = std::make_shared<CheckArgs>();
    auto* check = group->add_subcommand("check", "Would the egress policy allow HOST[:PORT], and why");
    check->add_option("ARGS", check_args->positional, "[NAME] HOST[:PORT] (port 443 unless given)")->required();
    // The same flags as create, defined once (add_policy_flags): check what create would build.
    add_policy_flags(*check, check_args->policy);
    check->footer(
        "\nExit status: 0 allowed, 4 refused, 5 allowed by the policy but the name does not resolve now,\n"
        "1 bad input.\n\nExamples:\n"
        "  agentctl policy check demo api.github.com:443\n"
        "  agentctl policy check --profile strict --allow '*.example.com' www.example.com\n"
        "  agentctl policy check --agent claude --allow-preset apt api.anthropic.com\n"
        "  agentctl policy check --allow 10.0.0.5 10.0.0.5:22 --output json");
    check->callback(
        [&env, check_args] { env.action = [&env, check_args] { return run_check(env.session, *check_args); }; });

    for (bool is_add : {true, false}) {
        auto args = std::make_shared<ChangeArgs>();
        auto* cmd = group->add_subcommand(is_add ? "add" : "remove",
                                          is_add ? "Allow more destinations in a sandbox, live (no restart)"
                                                 : "Remove allow entries from a sandbox, live (no restart)");
        cmd->add_option("NAME", args->name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
        cmd->add_option("ENTRY", args->entries, "Allow entries: host, host:443, *.domain:80,443, IP, URL")->required();
        if (is_add) {
            cmd->add_option("--for", args->duration,
                            "Grant them for this long only (30m, 1h, 7d, 1h30m): then the proxy drops them and ends "
                            "their connections")
                ->type_name("DURATION");
        }
        if (is_add) {
            set_examples(*cmd, {"agentctl policy add demo pypi.org:443 files.pythonhosted.org:443",
                                "agentctl policy add demo uploads.example.com:443 --for 1h"});
        } else {
            set_examples(*cmd, {"agentctl policy remove demo pypi.org:443"});
        }
        cmd->callback([&env, args, is_add] {
            env.action = [&env, args, is_add] { return run_change(env.session, *args, is_add); };
        });
    }

    auto budget_args = std::make_shared<ChangeArgs>();
    auto* budget = group->add_subcommand(
        "budget", "Cap what a sandbox may send to a destination (HOST:PORT=SIZE), live; SIZE none lifts it");
    budget->add_option("NAME", budget_args->name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    budget->add_option("BUDGET", budget_args->entries, "HOST:PORT=SIZE (50MiB, 1GiB, bytes) or HOST:PORT=none")
        ->required();
    set_examples(*budget, {"agentctl policy budget demo api.github.com:443=50MiB"});

    auto propose_args = std::make_shared<ProposeArgs>();
    auto* propose = group->add_subcommand(
        "propose", "Propose an allowlist from what a sandbox used and was refused (its network log)");
    propose->add_option("NAME", propose_args->name, "Sandbox name")->required()->type_name(value_type::k_sandbox);
    propose->add_option("--as", propose_args->form, "allow-file (default: for --allow-file) or profile")
        ->check(CLI::IsMember({"allow-file", "profile"}));
    propose->add_flag("--wildcards", propose_args->wildcards,
                      "Group two or more names under one parent domain into *.parent");
    propose->add_option("--since", propose_args->since, "Only what was logged since a duration ago or a time")
        ->type_name("DURATION|TIME");
    set_examples(*propose,
                 {"agentctl policy propose demo > demo.allow", "agentctl create demo2 --allow-file demo.allow",
                  "agentctl policy propose demo --as profile --wildcards > ~/.config/agentctl/profiles/demo.yaml"});
    propose->callback([&env, propose_args] {
        env.action = [&env, propose_args] { return run_propose(env.session, *propose_args); };
    });
    budget->callback(
        [&env, budget_args] { env.action = [&env, budget_args] { return run_budget(env.session, *budget_args); }; });
}

}  // namespace agentctl::cli
