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
#include "provider/incus/exec_stream.hpp"
#include "provider/incus/naming.hpp"
#include "provider/incus/provider_impl.hpp"

namespace agentctl::provider::incus {

ExecResult IncusProvider::run_as_root(const std::string& name, const std::string& script, int timeout_seconds) {
    return m_api.exec(name, exec_payload({"/bin/sh", "-c", script}, {}, nullptr), timeout_seconds);
}

std::vector<std::string> IncusProvider::incus_exec_argv(const std::string& name, const Json& instance, bool root,
                                                        const std::map<std::string, std::string>& env,
                                                        const std::vector<std::string>& command) const {
    std::vector<std::string> argv{"incus", "exec", on_server(name)};
    if (!m_project.empty()) {
        argv.insert(argv.end(), {"--project", m_project});
    }
    std::optional<GuestUser> user;
    if (!root) {
        user = recorded_user(instance);
        if (!user) {
            throw Error(fmt::format("{} has no sandbox user recorded (its create did not finish)", name),
                        "use --root, or delete and recreate it");
        }
        argv.insert(argv.end(),
                    {"--user", std::to_string(user->uid), "--group", std::to_string(user->gid), "--cwd", user->home});
    }
    auto environment = exec_environment(user ? &*user : nullptr);
    for (const auto& [k, v] : env) environment[k] = v;
    for (const auto& [k, v] : environment) argv.insert(argv.end(), {"--env", k + "=" + v});
    argv.emplace_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
}

int IncusProvider::exec(const std::string& name, const ExecRequest& request) {
    if (request.argv.empty()) throw Error("exec needs a command", "agentctl exec NAME -- CMD [ARGS...]");
    auto instance = require_instance(name);
    if (!running(instance)) {
        throw Error(fmt::format("sandbox {} is not running", name), "start it first: agentctl start " + name);
    }
    if (request.tty) {
        auto argv = incus_exec_argv(name, instance, request.root, request.env, request.argv);
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
    std::optional<GuestUser> user;
    if (!request.root) {
        user = recorded_user(instance);
        if (!user) {
            throw Error(fmt::format("{} has no sandbox user recorded (its create did not finish)", name),
                        "use --root, or delete and recreate it");
        }
    }
    const auto payload = streamed_exec_payload(request.argv, request.env, user ? &*user : nullptr);
    auto response = m_client->query("POST", fmt::format("/1.0/instances/{}/exec", name), &payload);
    if (m_api.preview()) return 0;
    m_context.out << std::flush;
    stream_exec(*m_client->transport(), response.operation,
                parse_exec_secrets(response.metadata.value("metadata", Json::object())), STDOUT_FILENO, STDERR_FILENO);
    // The streams have ended; the command has (or is about to).
    for (;;) {
        auto op = m_client->wait(response.operation, 60);
        const auto status = op.value("status", std::string());
        if (status != "Running" && status != "Pending") {
            return op.value("metadata", Json::object()).value("return", -1);
        }
    }
}

int IncusProvider::shell(const std::string& name, bool root) {
    auto instance = require_instance(name);
    if (!running(instance)) {
        throw Error(fmt::format("sandbox {} is not running", name), "start it first: agentctl start " + name);
    }
    std::string login_shell = root ? "/bin/sh" : config_value(instance, key::k_shell);
    if (root) {
        // root's own shell; bash when the image has it.
        login_shell = config_value(instance, key::k_shell) == "/bin/bash" ? "/bin/bash" : "/bin/sh";
    }
    if (login_shell.empty()) login_shell = "/bin/sh";
    auto argv = incus_exec_argv(name, instance, root, {}, {login_shell, "-l"});
    if (m_context.preview) {
        m_context.out << shell_join(argv) << '\n';
        return 0;
    }
    ProcessRequest process;
    process.argv = std::move(argv);
    process.interactive = true;
    return m_context.runner.run(process).pass_through_code();
}

void IncusProvider::view(const std::string& name, bool read_only) {
    auto instance = require_instance(name);
    if (config_value(instance, key::k_isolation) != "vm" && instance.value("type", "") != "virtual-machine") {
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
