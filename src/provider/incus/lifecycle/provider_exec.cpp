// exec, shell and view.
//
// agentctl's own guest commands (bootstrap, probes, installs) go through the
// API with recorded output: they are short and agentctl reads their output.
// The user's `exec` streams: the exec operation's websockets are copied to
// this process's stdout and stderr as the command writes (exec_stream.hpp),
// through fixed-size buffers, and the exit code is the operation's. `shell`,
// `exec -t` and `view` need a terminal and hand it to the `incus` client
// through ProviderContext::runner.
#include <unistd.h>

#include <optional>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/incus/client/exec_stream.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"

namespace agentctl::provider::incus {
namespace {

// The sandbox user a command runs as; nullopt for root.
std::optional<GuestUser> command_user(const std::string& name, const SandboxRecord& record, bool root) {
    if (root) return std::nullopt;
    if (!record.guest) {
        throw Error(fmt::format("{} has no sandbox user recorded (its create did not finish)", name),
                    "use --root, or delete and recreate it");
    }
    return record.guest;
}

}  // namespace

ExecResult IncusProvider::run_as_root(const std::string& name, const std::string& script, int timeout_seconds) {
    return m_api.exec(name, exec_payload({"/bin/sh", "-c", script}, {}, nullptr), timeout_seconds);
}

std::vector<std::string> IncusProvider::incus_exec_argv(const std::string& name, const GuestUser* user,
                                                        const std::map<std::string, std::string>& env,
                                                        const std::vector<std::string>& command,
                                                        const std::string& cwd) const {
    std::vector<std::string> argv{"incus", "exec", on_server(name)};
    if (!m_project.empty()) {
        argv.insert(argv.end(), {"--project", m_project});
    }
    if (user != nullptr) {
        argv.insert(argv.end(), {"--user", std::to_string(user->uid), "--group", std::to_string(user->gid), "--cwd",
                                 cwd.empty() ? user->home : cwd});
    } else if (!cwd.empty()) {
        argv.insert(argv.end(), {"--cwd", cwd});
    }
    auto environment = exec_environment(user);
    for (const auto& [k, v] : env) environment[k] = v;
    for (const auto& [k, v] : environment) argv.insert(argv.end(), {"--env", k + "=" + v});
    argv.emplace_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
}

int IncusProvider::exec(const std::string& given, const ExecRequest& request) {
    if (request.argv.empty()) throw Error("exec needs a command", "agentctl exec NAME -- CMD [ARGS...]");
    auto found = find_sandbox(given);
    const auto& name = found.name;
    auto instance = checked(name, std::move(found.instance));
    if (!instance.running()) {
        throw Error(fmt::format("sandbox {} is not running", name), "start it first: agentctl start " + name);
    }
    const auto user = command_user(name, read_sandbox_record(instance), request.root);
    const GuestUser* as = user ? &*user : nullptr;
    if (!request.cwd.empty() && !m_context.preview) require_directory(name, as, request);
    if (request.tty) {
        auto argv = incus_exec_argv(name, as, request.env, request.argv, request.cwd);
        argv.insert(argv.begin() + 3, "-t");
        if (m_context.preview) {
            m_context.out << shell_join(argv) << '\n';
            return 0;
        }
        ProcessRequest process;
        process.argv = std::move(argv);
        process.interactive = true;
        return m_context.runner.run(process).pass_through_code();
    }
    auto payload = streamed_exec_payload(request.argv, request.env, as);
    if (!request.cwd.empty()) payload["cwd"] = request.cwd;
    auto response = m_client->query("POST", fmt::format("/1.0/instances/{}/exec", name), &payload);
    if (m_api.preview()) return 0;
    m_context.out << std::flush;
    stream_exec(*m_client->transport(), response.operation,
                parse_exec_secrets(response.metadata.value("metadata", Json::object())),
                request.forward_stdin ? STDIN_FILENO : -1, STDOUT_FILENO, STDERR_FILENO);
    return exec_outcome(name, response.operation, request, as);
}

// Incus runs a command whose working directory is missing in / instead:
// the directory is checked first, as the command's user.
void IncusProvider::require_directory(const std::string& name, const GuestUser* user, const ExecRequest& request) {
    auto check = exec_payload({"/bin/sh", "-c", "cd -- \"$1\"", "sh", request.cwd}, request.env, user);
    if (m_api.exec(name, check, 30).exit_code != 0) {
        throw Error(fmt::format("cannot run the command in {} in sandbox {}: no such directory (or no access)",
                                request.cwd, name),
                    "the working directory (-w) must exist in the sandbox");
    }
}

// The exit code of a streamed exec whose streams have ended. Incus fails the
// operation when the command exits 127 or 126 ("Command not found", "Command
// not executable"; internal/server/instance/drivers: the exec's Wait), and
// then a wait on it answers with that error only: the operation itself still
// holds the code. The command's own `exit 127` looks the same, so the
// command is looked up before saying it was not found.
int IncusProvider::exec_outcome(const std::string& name, const std::string& operation, const ExecRequest& request,
                                const GuestUser* user) {
    for (;;) {
        try {
            auto op = m_client->wait(operation, 60);
            if (operation_in_progress(op)) continue;
            return op.value("metadata", Json::object()).value("return", -1);
        } catch (const Error&) {
            break;  // failed: read below what it left
        }
    }
    const auto op =
        m_client->query("GET", fmt::format("/1.0/operations/{}", operation.substr(operation.rfind('/') + 1))).metadata;
    const int code = op.value("metadata", Json::object()).value("return", -1);
    const auto err = op.value("err", std::string());
    const auto& command = request.argv.front();
    if (code == 127 || code == 126) {
        // Is it there and executable, where and as whom the command ran?
        auto check = exec_payload({"/bin/sh", "-c",
                                   "case $1 in */*) [ -f \"$1\" ] && [ -x \"$1\" ];; "
                                   "*) command -v -- \"$1\" >/dev/null;; esac",
                                   "sh", command},
                                  request.env, user);
        if (!request.cwd.empty()) check["cwd"] = request.cwd;
        bool runnable = false;
        try {
            runnable = m_api.exec(name, check, 30).exit_code == 0;
        } catch (const Error&) {
        }
        if (runnable) return code;  // the command's own exit code
        if (code == 127) {
            throw Error(fmt::format("{}: command not found in sandbox {}", command, name),
                        "check the name and the PATH (`agentctl exec " + name + " -- sh -c 'echo $PATH'`)", 127);
        }
        throw Error(fmt::format("{}: cannot be run in sandbox {}: not an executable file (or permission denied)",
                                command, name),
                    "", 126);
    }
    throw Error(fmt::format("the command in sandbox {} failed: {}", name, err.empty() ? "no reason given" : err), "",
                code > 0 && code < 256 ? code : exit_code::k_error);
}

int IncusProvider::shell(const std::string& given, bool root) {
    auto found = find_sandbox(given);
    const auto& name = found.name;
    auto instance = checked(name, std::move(found.instance));
    if (!instance.running()) {
        throw Error(fmt::format("sandbox {} is not running", name), "start it first: agentctl start " + name);
    }
    const auto record = read_sandbox_record(instance);
    const auto user = command_user(name, record, root);
    // root's own shell: bash when the image has it (the user's is bash).
    const bool bash = record.guest && record.guest->shell == "/bin/bash";
    const auto login_shell = user ? user->shell : bash ? "/bin/bash" : "/bin/sh";
    auto argv = incus_exec_argv(name, user ? &*user : nullptr, {}, {login_shell, "-l"});
    if (m_context.preview) {
        m_context.out << shell_join(argv) << '\n';
        return 0;
    }
    ProcessRequest process;
    process.argv = std::move(argv);
    process.interactive = true;
    return m_context.runner.run(process).pass_through_code();
}

void IncusProvider::view(const std::string& given, bool read_only) {
    const auto name = instance_of(given);
    if (read_sandbox_record(require_instance(name)).isolation != Isolation::Vm) {
        throw Error(
            fmt::format("view is not available for {}: it is a container, which has no graphical console", name),
            "view needs a virtual machine sandbox (the default isolation); use `agentctl shell " + name + "`");
    }
    if (read_only) {
        m_context.reporter.warning("incus console has no read-only mode; the console accepts input");
    }
    std::vector<std::string> argv{"incus", "console", on_server(name), "--type=vga"};
    if (m_context.preview) {
        m_context.out << shell_join(argv) << '\n';
        return;
    }
    ProcessRequest process;
    process.argv = std::move(argv);
    process.interactive = true;
    auto result = m_context.runner.run(process);
    if (!result.ok()) {
        throw Error(fmt::format("incus console {} --type=vga failed (exit {})", name, result.pass_through_code()),
                    "it needs a SPICE viewer on this machine (remote-viewer or spicy)");
    }
}

}  // namespace agentctl::provider::incus
