// agentctl start on the lima provider: re-apply the settings confinement
// depends on, vet Lima's effective configuration, start the egress proxy, boot
// under sandbox-exec, and prove from inside the guest that a direct connection
// out is refused.
#include <filesystem>
#include <sys/stat.h>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "egress_proxy/sandbox_ca.hpp"
#include "policy/catalog.hpp"
#include "policy/secret_store.hpp"
#include "provider/common/agent_install.hpp"
#include "provider/lima/confinement_check.hpp"
#include "provider/lima/guest_probe.hpp"
#include "provider/common/mount_report.hpp"
#include "provider/lima/lima_backend.hpp"
#include "provider/lima/lima_paths.hpp"
#include "provider/lima/loopback.hpp"
#include "sandbox_profile/sbpl_profile.hpp"

namespace agentctl::provider::lima {
namespace {

std::string canonical_or_self(const std::string& path) {
    std::error_code ec;
    auto canonical = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : canonical.string();
}

bool file_exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

// The `limactl edit` expression start applies first: the settings confinement
// depends on (pinned ports, DNS), re-applied every time, and the requested
// mounts. Empty when there is nothing to apply.
std::string start_edit(const LimaState& state, const std::vector<Mount>* mounts) {
    if (state.unrestricted) return mounts ? mounts_expression(*mounts) : std::string();
    ConfinementSettings settings{state.ssh_port, state.proxy_port, state.dns_disabled};
    return start_expression(settings, mounts);
}

}  // namespace

void LimaBackend::refuse_unsafe_config(const LimaState& state, const LimaInstance& instance) {
    ExpectedConfig expected;
    for (auto m : state.mounts) {
        m.host_path = canonical_or_self(m.host_path);
        expected.mounts.push_back(std::move(m));
    }
    expected.state_dir = canonical_or_self(m_ctx.state_dir);
    expected.settings = {state.ssh_port, state.unrestricted ? std::uint16_t{0} : state.proxy_port, state.dns_disabled};
    expected.confined = !state.unrestricted;
    LimaInstance resolved = instance;
    for (auto& m : resolved.config.mounts) m.location = canonical_or_self(m.location);
    auto refusals = check_effective_config(resolved, expected);
    if (!refusals.empty()) throw Error(render_refusals(state.name, refusals), k_troubleshooting);
}

Confinement LimaBackend::check_confinement(const std::string& name, std::uint16_t ssh_port, std::uint16_t proxy_port) {
    CanaryListener canary;
    if (canary.port() == ssh_port || canary.port() == proxy_port) {
        throw Error("internal error: the confinement check's listener got an allowed port");
    }
    ProcessRequest request;
    request.argv = limactl_shell(name, {"sh", "-c", probe_script(k_host_gateway, std::to_string(canary.port()))});
    request.timeout = std::chrono::seconds(90);
    auto result = m_ctx.runner.run(request);
    auto outcome = parse_probe_output(result.out, result.pass_through_code());
    return judge_probe(outcome, canary.connected(), k_host_gateway, canary.port());
}

void LimaBackend::install_agent(LimaState& state) {
    const auto& agent = policy::find_agent(state.agent);  // throws naming the known agents
    auto argv = limactl_shell(state.name, common::agent_install_argv(agent));
    if (m_ctx.preview) {
        print_preview(argv);
        return;
    }
    m_ctx.reporter.step(fmt::format("installing {} through the egress proxy", state.agent));
    ProcessRequest request;
    request.argv = argv;
    request.timeout = std::chrono::minutes(15);
    auto result = m_ctx.runner.run(request);
    if (!result.ok()) {
        throw common::agent_install_failed(state.agent, state.name, common::k_step_installer,
                                           result.pass_through_code(), result.out + result.err,
                                           fmt::format("`agentctl start {}` retries the install", state.name));
    }
    state.agent_installed = true;
    save_state(m_ctx.state_dir, state);
}

void LimaBackend::boot_unrestricted(LimaState& state) {
    run_limactl(limactl_start(state.name), "start " + state.name);
    if (m_ctx.preview) return;
    auto inst = inspect(state.name);
    state.hostagent_pid = inst ? inst->host_agent_pid : 0;
    state.confinement = {};
    save_state(m_ctx.state_dir, state);
}

LimaBackend::ConfinedBoot LimaBackend::confined_boot(const LimaState& state) const {
    sandbox_profile::SbplOptions options;
    options.instance = state.name;
    options.ssh_port = state.ssh_port;
    options.proxy_port = state.proxy_port;
    options.lima_home = m_lima_home;
    options.host_resolver = !state.dns_disabled;
    const auto profile = sandbox_profile::compact_sbpl(sandbox_profile::generate_sbpl(options));
    ConfinedBoot boot;
    boot.secrets = !sandbox_secrets(state.name).empty();
    boot.proxy = proxy_argv(state.name, state.proxy_port, boot.secrets);
    boot.start = sandboxed(m_ctx.platform.sandbox_exec_path(), profile, limactl_start(state.name));
    // Lima's own downloads during start (the base image on first boot) go
    // through the egress proxy too: nothing else can leave the sandbox.
    const std::string local_proxy = "http://127.0.0.1:" + std::to_string(state.proxy_port);
    boot.env = {{"http_proxy", local_proxy},
                {"https_proxy", local_proxy},
                {"HTTP_PROXY", local_proxy},
                {"HTTPS_PROXY", local_proxy}};
    return boot;
}

void LimaBackend::print_confined_boot(const LimaState& state) {
    const auto boot = confined_boot(state);
    print_preview(boot.proxy);
    std::vector<std::string> with_env = {"env"};
    for (const auto& [k, v] : boot.env) with_env.push_back(k + "=" + v);
    with_env.insert(with_env.end(), boot.start.begin(), boot.start.end());
    print_preview(with_env);
    print_preview(limactl_shell(state.name, {"sh", "-c", probe_script(k_host_gateway, "<canary-port>")}));
    if (boot.secrets) print_preview(guest_secrets_argv(state.name, true));
}

std::vector<std::string> LimaBackend::guest_secrets_argv(const std::string& name, bool preview) const {
    // A preview makes no CA: it names the script instead of printing it.
    if (preview)
        return exec_command(name, {"sh", "-c", "<the sandbox CA and the placeholders: guest_secret_script>"}, true);
    const auto dir = instance_state_dir(m_ctx.state_dir, name);
    const auto ca = egress_proxy::load_or_make_sandbox_ca(dir, name);
    return exec_command(
        name, {"sh", "-c", common::guest_secret_script(ca.cert, common::secret_environment(sandbox_secrets(name)))},
        true);
}

void LimaBackend::install_guest_secrets(LimaState& state) {
    const auto argv = guest_secrets_argv(state.name, false);
    m_ctx.reporter.step(fmt::format(
        "installing the sandbox CA and the secrets' placeholders in {} (as root, limactl shell)", state.name));
    ProcessRequest request;
    request.argv = argv;
    request.timeout = std::chrono::minutes(2);
    const auto result = m_ctx.runner.run(request);
    if (!result.ok() || result.out.find(common::k_secrets_configured) == std::string::npos) {
        // The script's own word is its last line.
        auto detail = result.err.empty() ? result.out : result.err;
        while (!detail.empty() && (detail.back() == '\n' || detail.back() == '\r')) detail.pop_back();
        detail = detail.substr(detail.rfind('\n') == std::string::npos ? 0 : detail.rfind('\n') + 1);
        halt(state,
             fmt::format("installing the sandbox CA in \"{}\" failed ({}): {}; the instance was stopped", state.name,
                         result.ending(), detail),
             "the guest needs sh, sed, grep and passwordless sudo; its CA goes to " +
                 std::string(policy::k_sandbox_ca_file));
    }
    state.secrets_installed = true;
    save_state(m_ctx.state_dir, state);
}

std::string LimaBackend::boot_confined(LimaState& state) {
    const auto paths = proxy_paths(state.name);
    const auto boot = confined_boot(state);
    stop_proxy(paths.pid_file);  // a stale proxy from a crash
    if (!loopback_port_free(state.proxy_port)) {
        throw Error(fmt::format("the egress proxy port 127.0.0.1:{} of \"{}\" is in use by another program",
                                state.proxy_port, state.name),
                    "stop that program, or delete and re-create the sandbox to pin another port");
    }
    // The secrets' values now (a command secret's command runs at each start), before anything starts:
    // a secret that is gone stops the start here.
    const auto dir = instance_state_dir(m_ctx.state_dir, state.name);
    const auto secrets =
        boot.secrets ? common::proxy_secret_payload(m_ctx.state_dir, dir, state.name, m_ctx.runner) : std::string();
    start_detached_proxy(boot.proxy, (dir / "egress-proxy.out").string(), paths.pid_file, state.proxy_port, secrets);
    try {
        run_limactl(boot.start, "start " + state.name + " under sandbox-exec", boot.env);
    } catch (...) {
        stop_proxy(paths.pid_file);
        throw;
    }
    auto inst = inspect(state.name);
    state.hostagent_pid = inst ? inst->host_agent_pid : 0;
    save_state(m_ctx.state_dir, state);

    auto confinement = check_confinement(state.name, state.ssh_port, state.proxy_port);
    if (confinement.verdict == Verdict::Escaped) halt_escaped(state, confinement.reason);
    state.confinement = {
        confinement.verdict == Verdict::Verified ? ConfinementState::Verified : ConfinementState::NotVerified,
        confinement.reason};
    save_state(m_ctx.state_dir, state);
    if (boot.secrets) install_guest_secrets(state);
    return "network confinement " + to_string(state.confinement);
}

void LimaBackend::halt_escaped(LimaState& state, const std::string& reason) {
    halt(state, "network confinement failed: " + reason + "; the instance was stopped",
         std::string("do not start it with limactl; ") + k_troubleshooting);
}

void LimaBackend::halt(LimaState& state, const std::string& message, const std::string& hint) {
    ProcessRequest request;
    request.argv = limactl_stop(state.name, true);
    request.timeout = std::chrono::minutes(5);
    try {
        (void)m_ctx.runner.run(request);
    } catch (const Error&) {
    }
    stop_proxy(proxy_paths(state.name).pid_file);
    state.hostagent_pid = 0;
    state.confinement = {};
    save_state(m_ctx.state_dir, state);
    throw Error(message, hint);
}

void LimaBackend::preview_start(const LimaState& state, const std::string& expression,
                                const std::vector<Mount>* mounts) {
    if (!expression.empty()) print_preview(limactl_edit(state.name, expression));
    if (state.unrestricted) {
        print_preview(limactl_start(state.name));
    } else {
        print_confined_boot(state);
    }
    // What the real start would expose: the requested mounts, else the sticky set.
    common::report_mounts(m_ctx.reporter, mounts ? *mounts : state.mounts);
}

void LimaBackend::report_already_running(const LimaState& state, const LimaInstance& instance) {
    const auto& name = state.name;
    if (state.hostagent_pid == 0 || instance.host_agent_pid != state.hostagent_pid) {
        throw Error(render_refusals(name, {{RefusalKind::RunningNotStartedByAgentctl,
                                            fmt::format("it is already running, but not under agentctl (hostagent pid "
                                                        "{}), so its egress is not confined",
                                                        instance.host_agent_pid)}}),
                    std::string("stop it with `limactl stop ") + name + "`, then `agentctl start " + name + "`; " +
                        k_troubleshooting);
    }
    m_ctx.reporter.notice(fmt::format("sandbox \"{}\" is already running", name));
    common::report_mounts(m_ctx.reporter, state.mounts);
    if (!state.confinement.empty()) m_ctx.reporter.notice("network confinement " + to_string(state.confinement));
}

void LimaBackend::refuse_start_conflicts(const LimaState& state) {
    const auto& name = state.name;
    auto registrations = autostart_registrations(m_home, "/", name, file_exists);
    if (!registrations.empty()) {
        throw Error(render_refusals(name, {{RefusalKind::Autostart,
                                            fmt::format("it is registered to start with launchd (limactl autostart): "
                                                        "{}",
                                                        registrations.front())}}),
                    std::string("run `limactl autostart disable ") + name + "`; " + k_troubleshooting);
    }
    if (!state.unrestricted && !loopback_port_free(state.ssh_port)) {
        throw Error(fmt::format("the pinned SSH port 127.0.0.1:{} of \"{}\" is in use by another program",
                                state.ssh_port, name),
                    "stop that program, or delete and re-create the sandbox to pin another port");
    }
}

void LimaBackend::configure(LimaState& state, const std::string& expression, const std::vector<Mount>* mounts) {
    const auto& name = state.name;
    if (!expression.empty()) run_limactl(limactl_edit(name, expression), "configure " + name);
    if (mounts) {
        state.mounts = *mounts;
        save_state(m_ctx.state_dir, state);
    }
    auto inst = inspect(name);
    if (!inst) throw Error(fmt::format("Lima has no instance \"{}\" any more", name));
    refuse_unsafe_config(state, *inst);
}

void LimaBackend::boot(LimaState& state) {
    if (state.unrestricted) {
        m_ctx.reporter.warning(
            fmt::format("sandbox \"{}\" has no network policy: it starts with unrestricted egress "
                        "(created with --no-network-policy)",
                        state.name));
        boot_unrestricted(state);
        common::report_mounts(m_ctx.reporter, state.mounts);
    } else {
        auto line = boot_confined(state);
        common::report_mounts(m_ctx.reporter, state.mounts);
        m_ctx.reporter.notice(line);
    }
}

void LimaBackend::start(const std::string& name, const StartRequest& request) {
    auto state = require_state(name);
    if (!state.unrestricted && !m_ctx.platform.is_macos()) {
        throw Error("the lima provider can only confine a sandbox on macOS (sandbox-exec); this host is not macOS",
                    "use the incus provider on Linux", exit_code::k_not_available);
    }
    const std::vector<Mount>* mounts = request.mounts ? &*request.mounts : nullptr;
    const auto expression = start_edit(state, mounts);
    // The sticky mounts are checked again from their canonical paths (a
    // directory swapped for a symlink since create is refused); mounts this
    // start was given were checked just now by the same rules.
    if (m_ctx.preview) {
        if (!mounts) common::recheck_recorded_mounts(m_ctx, name, state.profiles, state.mounts);
        preview_start(state, expression, mounts);
        return;
    }

    core::FileLock lock(lock_file_path(m_ctx.state_dir, name));
    state = require_state(name);
    auto inst = inspect(name);
    if (!inst) {
        throw Error(fmt::format("Lima has no instance \"{}\" any more", name),
                    "remove agentctl's record of it with `agentctl delete " + name + "`");
    }
    if (inst->status == "Running") {
        report_already_running(state, *inst);
        return;
    }
    refuse_start_conflicts(state);
    if (!mounts) common::recheck_recorded_mounts(m_ctx, name, state.profiles, state.mounts);
    configure(state, expression, mounts);
    boot(state);
    if (!state.agent.empty() && !state.agent_installed) install_agent(state);
}

}  // namespace agentctl::provider::lima
