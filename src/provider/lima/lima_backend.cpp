// The lima provider: everything but create and start (lima_backend_create.cpp,
// lima_backend_start.cpp).
#include "provider/lima/lima_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <ostream>

#include <csignal>
#include <unistd.h>
#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "policy/secret_store.hpp"
#include "provider/lima/lima_paths.hpp"

namespace agentctl::provider::lima {
namespace {

std::string env_or(const char* key, const std::string& fallback) {
    const char* value = std::getenv(key);
    return value && *value ? std::string(value) : fallback;
}

std::string first_line(const std::string& text) {
    auto trimmed = text;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r')) trimmed.pop_back();
    return trimmed;
}

}  // namespace

LimaBackend::LimaBackend(ProviderContext& context) : m_ctx(context) {
    m_home = env_or("HOME", "/");
    m_lima_home = env_or("LIMA_HOME", m_home + "/.lima");
}

// ------------------------------------------------------------------ limactl

// `limactl --version` prints "limactl version 1.0.3" (cobra's version template
// over rootCmd.Version, lima cmd/limactl/main.go).
std::string LimaBackend::backend_version() {
    ProcessRequest request;
    request.argv = {"limactl", "--version"};
    request.timeout = std::chrono::seconds(20);
    const auto result = m_ctx.runner.run(request);
    const auto line = first_line(result.out);
    const auto space = line.rfind(' ');
    if (!result.ok() || space == std::string::npos || line.rfind("limactl version ", 0) != 0) {
        throw Error(fmt::format("`limactl --version` failed ({}): {}", result.exit_code,
                                first_line(result.err.empty() ? result.out : result.err)));
    }
    return "Lima " + line.substr(space + 1);
}

void LimaBackend::print_preview(const std::vector<std::string>& argv) { m_ctx.out << shell_join(argv) << "\n"; }

ProcessResult LimaBackend::run_limactl(const std::vector<std::string>& argv, const std::string& what,
                                       std::map<std::string, std::string> env) {
    if (m_ctx.preview) {
        print_preview(argv);
        return {};
    }
    ProcessRequest request;
    request.argv = argv;
    request.env = std::move(env);
    request.timeout = std::chrono::minutes(20);
    auto result = m_ctx.runner.run(request);
    if (!result.ok()) {
        std::string detail = first_line(result.err.empty() ? result.out : result.err);
        throw Error(fmt::format("cannot {}: `{}` failed ({}): {}", what,
                                shell_join({argv[0], argv.size() > 1 ? argv[1] : ""}), result.ending(), detail),
                    "run the command by hand to see Lima's full output");
    }
    return result;
}

std::optional<LimaInstance> LimaBackend::inspect(const std::string& name) {
    ProcessRequest request;
    request.argv = limactl_list(name);
    request.timeout = std::chrono::minutes(1);
    auto result = m_ctx.runner.run(request);
    if (!result.ok()) {
        // Lima: "No instance matching NAME found." and exit 1 (cmd/limactl/list.go).
        if (result.err.find("No instance matching") != std::string::npos) return std::nullopt;
        throw Error("cannot list Lima instances: " + first_line(result.err), "check that `limactl list` works");
    }
    for (auto& inst : parse_instance_list(result.out, m_home)) {
        if (inst.name == name) return inst;
    }
    return std::nullopt;
}

// ------------------------------------------------------------------ state

LimaState LimaBackend::require_state(const std::string& name) const {
    auto state = load_state(m_ctx.state_dir, name);
    if (!state) {
        throw Error(fmt::format("no Lima sandbox named \"{}\" was created by agentctl", name),
                    "run `agentctl list` to see your sandboxes, or `agentctl create " + name + "`");
    }
    return *state;
}

ProxyPaths LimaBackend::proxy_paths(const std::string& name) const {
    return {egress_policy_path(m_ctx.state_dir, name).string(), egress_pid_path(m_ctx.state_dir, name).string(),
            egress_log_path(m_ctx.state_dir, name).string(),
            egress_secrets_socket_path(m_ctx.state_dir, name).string()};
}

std::vector<common::SandboxSecret> LimaBackend::sandbox_secrets(const std::string& name) const {
    return common::read_sandbox_secrets(instance_state_dir(m_ctx.state_dir, name));
}

std::vector<std::string> LimaBackend::proxy_argv(const std::string& name, std::uint16_t port, bool secrets) const {
    // The proxy is started detached with execv: it needs an absolute path. A
    // bare name (where the platform could not tell agentctl its own path) is
    // looked up on PATH the way a shell would.
    std::string exe = m_ctx.self_exe.empty() ? std::string("agentctl") : m_ctx.self_exe;
    if (exe.find('/') == std::string::npos) {
        std::string path = env_or("PATH", "/usr/bin:/bin");
        std::size_t start = 0;
        while (start <= path.size()) {
            auto end = path.find(':', start);
            if (end == std::string::npos) end = path.size();
            auto candidate = std::filesystem::path(path.substr(start, end - start)) / exe;
            if (end > start && ::access(candidate.c_str(), X_OK) == 0) {
                exe = candidate.string();
                break;
            }
            start = end + 1;
        }
    }
    return proxy_command(exe, port, proxy_paths(name), secrets, ::getuid());
}

std::set<std::uint16_t> LimaBackend::ports_in_use_by_other_instances(const std::string& name) const {
    std::set<std::uint16_t> taken;
    std::error_code ec;
    auto root = instances_dir(m_ctx.state_dir);
    for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
        auto other = entry.path().filename().string();
        if (other == name) continue;
        try {
            if (auto s = load_state(m_ctx.state_dir, other)) {
                taken.insert(s->ssh_port);
                taken.insert(s->proxy_port);
            }
        } catch (const Error&) {
            // a broken state file elsewhere must not block this instance
        }
    }
    return taken;
}

void LimaBackend::write_policy(const std::string& name, const policy::NetworkPolicy& network) {
    core::write_file_atomic(egress_policy_path(m_ctx.state_dir, name), policy::policy_file_text(network));
}

// ------------------------------------------------------------------ verbs

void LimaBackend::stop(const std::string& name, const StopRequest& request) {
    auto state = require_state(name);
    if (m_ctx.preview) {
        print_preview(limactl_stop(name, request.force));
        return;
    }
    core::FileLock lock(lock_file_path(m_ctx.state_dir, name));
    auto inst = inspect(name);
    if (inst && inst->status != "Stopped") run_limactl(limactl_stop(name, request.force), "stop " + name);
    stop_proxy(proxy_paths(name).pid_file);
    state.hostagent_pid = 0;
    state.confinement = {};
    save_state(m_ctx.state_dir, state);
}

void LimaBackend::remove(const std::string& name, bool force) {
    auto state = load_state(m_ctx.state_dir, name);
    const auto dir = instance_state_dir(m_ctx.state_dir, name);
    if (!state && !std::filesystem::exists(dir)) {
        throw Error(fmt::format("no Lima sandbox named \"{}\" was created by agentctl", name),
                    "if it is a Lima instance of your own, delete it with `limactl delete " + name + "`");
    }
    if (m_ctx.preview) {
        print_preview(limactl_delete(name));
        return;
    }
    {
        core::FileLock lock(lock_file_path(m_ctx.state_dir, name));
        auto inst = inspect(name);
        if (inst && inst->status == "Running" && !force) {
            throw Error(fmt::format("sandbox \"{}\" is running", name),
                        "stop it first (`agentctl stop " + name + "`) or pass --force");
        }
        if (inst) run_limactl(limactl_delete(name), "delete " + name);
        stop_proxy(proxy_paths(name).pid_file);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) throw Error("cannot remove " + dir.string() + ": " + ec.message());
}

std::vector<InstanceInfo> LimaBackend::list() {
    std::vector<InstanceInfo> result;
    std::error_code ec;
    auto root = instances_dir(m_ctx.state_dir);
    if (!std::filesystem::exists(root, ec)) return result;
    ProcessRequest request;
    request.argv = limactl_list("");
    request.timeout = std::chrono::minutes(1);
    auto listed = m_ctx.runner.run(request);
    if (!listed.ok()) throw Error("cannot list Lima instances: " + first_line(listed.err));
    auto instances = parse_instance_list(listed.out, m_home);
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
        if (std::filesystem::exists(entry.path() / "state.json")) names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
        auto state = load_state(m_ctx.state_dir, n);
        if (!state) continue;
        InstanceInfo info;
        info.name = n;
        info.provider = "lima";
        info.status = "NotFound";
        for (const auto& inst : instances) {
            if (inst.name == n) info.status = inst.status;
        }
        info.image = state->image;
        info.profiles = state->profiles;
        info.created_at = state->created_at;
        info.mounts = state->mounts;
        info.isolation = "vm";
        info.user = state->user;
        result.push_back(std::move(info));
    }
    return result;
}

InstanceInfo LimaBackend::status(const std::string& name) {
    auto state = require_state(name);
    auto inst = inspect(name);
    InstanceInfo info;
    info.name = name;
    info.provider = "lima";
    info.status = inst ? inst->status : "NotFound";
    info.image = state.image;
    info.profiles = state.profiles;
    info.created_at = state.created_at;
    info.mounts = state.mounts;
    info.ports = state.ports;
    info.isolation = "vm";
    info.user = state.user;
    if (auto text = core::read_file_if_exists(egress_policy_path(m_ctx.state_dir, name))) {
        try {
            info.network = policy::from_policy_file_text(*text);
        } catch (const std::exception&) {
            info.network.reset();  // the proxy treats a bad policy as deny-all
        }
    }
    const bool running = inst && inst->status == "Running";
    if (state.unrestricted) {
        info.confinement = {ConfinementState::Off, "(created with --no-network-policy)"};
        info.widenings.push_back("no network policy: egress is unrestricted");
    } else if (running && state.hostagent_pid != 0 && inst->host_agent_pid == state.hostagent_pid) {
        info.confinement = state.confinement;
        // The probe runs in the guest (over ssh): its word; the sandbox-exec profile is the enforcement.
        if (!state.confinement.empty()) {
            info.evidence.source = "guest";
            info.extra.emplace_back("Confinement probe",
                                    "run in the guest: its word (the sandbox-exec profile on the host enforces the "
                                    "policy)");
        }
    } else if (running) {
        info.confinement = {ConfinementState::None,
                            "the running hostagent was not started by agentctl (a plain `limactl start`?); "
                            "egress is unrestricted until `agentctl stop " +
                                name + "` and `agentctl start " + name + "`"};
    }
    for (const auto& m : state.mounts) {
        if (m.writable) info.widenings.push_back("writable mount: " + m.host_path + " -> " + m.guest_path);
    }
    if (inst) info.extra.emplace_back("VM type", inst->vm_type);
    info.extra.emplace_back("SSH port", std::to_string(state.ssh_port));
    if (!state.unrestricted) {
        info.extra.emplace_back(
            "Egress proxy", fmt::format("127.0.0.1:{} ({})", state.proxy_port,
                                        running_proxy_pid(proxy_paths(name).pid_file) > 0 ? "running" : "not running"));
        info.extra.emplace_back("Egress log", egress_log_path(m_ctx.state_dir, name).string());
    }
    // Bindings only: the record holds no value.
    for (const auto& secret : sandbox_secrets(name)) {
        info.extra.emplace_back("Secret " + secret.name,
                                policy::describe_secret_use({secret.name, secret.env, secret.hosts, secret.origin}));
    }
    if (!state.agent.empty()) {
        info.extra.emplace_back("Agent", state.agent + (state.agent_installed ? " (installed)" : " (install pending)"));
    }
    return info;
}

int LimaBackend::exec(const std::string& name, const ExecRequest& request) {
    (void)require_state(name);
    std::vector<std::string> command;
    if (!request.env.empty()) {
        command.push_back("env");
        for (const auto& [k, v] : request.env) command.push_back(k + "=" + v);
    }
    command.insert(command.end(), request.argv.begin(), request.argv.end());
    auto argv = exec_command(name, command, request.root, request.cwd);
    if (m_ctx.preview) {
        print_preview(argv);
        return 0;
    }
    ProcessRequest process;
    process.argv = argv;
    // limactl shell passes its stdin to the command (and gives it a tty only
    // when stdin is a terminal): the command's stdin is ours when it is forwarded.
    process.interactive = request.tty || request.forward_stdin;
    m_ctx.out.flush();
    auto result = m_ctx.runner.run(process);
    if (!process.interactive) {
        m_ctx.out << result.out;
        m_ctx.out.flush();
        std::cerr << result.err;
    }
    return result.pass_through_code();
}

int LimaBackend::shell(const std::string& name, bool root) {
    (void)require_state(name);
    auto argv = shell_command(name, root);
    if (m_ctx.preview) {
        print_preview(argv);
        return 0;
    }
    ProcessRequest process;
    process.argv = argv;
    process.interactive = true;
    return m_ctx.runner.run(process).pass_through_code();
}

int LimaBackend::logs(const std::string& name, const LogRequest& request) {
    (void)require_state(name);
    return egress_proxy::print_network_log(egress_log_path(m_ctx.state_dir, name).string(), request, m_ctx.out);
}

void LimaBackend::apply_network_policy(const std::string& name, const policy::NetworkPolicy& network) {
    auto state = require_state(name);
    if (!network.dns.servers.empty()) {
        throw Error(
            "the lima provider cannot apply network.dns.servers: the guest's DNS always goes through Lima's "
            "host resolver",
            "remove dns.servers from the policy");
    }
    if (state.unrestricted || !network.enabled) {
        throw Error(
            fmt::format("sandbox \"{}\" was created with --no-network-policy; its egress is not filtered", name),
            "create a new sandbox without --no-network-policy");
    }
    if (m_ctx.preview) return;
    core::FileLock lock(lock_file_path(m_ctx.state_dir, name));
    write_policy(name, network);
    // The proxy also notices the changed file by itself; SIGHUP makes it immediate.
    if (int pid = running_proxy_pid(proxy_paths(name).pid_file); pid > 0) ::kill(pid, SIGHUP);
}

std::vector<std::string> LimaBackend::refresh_secret(const std::string& secret) {
    std::vector<std::string> reached;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(instances_dir(m_ctx.state_dir), ec)) {
        const auto name = entry.path().filename().string();
        const auto paths = proxy_paths(name);
        if (running_proxy_pid(paths.pid_file) <= 0) continue;  // not running: it reads the value at start
        if (auto line = common::rotate_sandbox_secret(m_ctx.state_dir, entry.path(), name, secret, paths.secrets_socket,
                                                      m_ctx.runner))
            reached.push_back(std::move(*line));
    }
    return reached;
}

}  // namespace agentctl::provider::lima
