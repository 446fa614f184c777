#include "provider/lima/proxy_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "provider/lima/loopback.hpp"

namespace agentctl::provider::lima {
namespace {

// kill(pid, 0) succeeds for a zombie too; on Linux, also look at its state.
bool alive(int pid) {
    if (pid <= 0 || ::kill(pid, 0) != 0) return false;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;  // not Linux (or already gone): trust kill()
    std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto close_paren = content.rfind(')');
    return close_paren == std::string::npos || close_paren + 2 >= content.size() || content[close_paren + 2] != 'Z';
}

int read_pid(const std::string& pid_file) {
    try {
        auto text = core::read_file_if_exists(pid_file);
        if (!text) return 0;
        return std::stoi(*text);
    } catch (...) {
        return 0;
    }
}

std::string tail(const std::string& path, std::size_t max_bytes = 600) {
    try {
        auto text = core::read_file_if_exists(path).value_or("");
        if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
        return text;
    } catch (...) {
        return {};
    }
}

// Double fork: the grandchild runs `argv` in a new session; returns its pid.
int spawn_detached(const std::vector<std::string>& argv, const std::string& output) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int pid_pipe[2];
    if (::pipe(pid_pipe) != 0) throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
    ::fcntl(pid_pipe[0], F_SETFD, FD_CLOEXEC);
    ::fcntl(pid_pipe[1], F_SETFD, FD_CLOEXEC);
    const char* out_path = output.c_str();

    pid_t first = ::fork();
    if (first < 0) {
        ::close(pid_pipe[0]);
        ::close(pid_pipe[1]);
        throw Error(std::string("cannot fork: ") + std::strerror(errno));
    }
    if (first == 0) {
        ::setsid();
        pid_t second = ::fork();
        if (second != 0) {
            int value = second;
            ssize_t ignored = ::write(pid_pipe[1], &value, sizeof value);
            (void)ignored;
            ::_exit(second < 0 ? 1 : 0);
        }
        int null_fd = ::open("/dev/null", O_RDONLY);
        int out_fd = ::open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
        if (out_fd >= 0) {
            ::dup2(out_fd, STDOUT_FILENO);
            ::dup2(out_fd, STDERR_FILENO);
        }
        ::execv(args[0], args.data());
        const char msg[] = "agentctl: cannot run the egress proxy executable\n";
        ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)ignored;
        ::_exit(127);
    }
    ::close(pid_pipe[1]);
    int grandchild = -1;
    ssize_t n;
    do {
        n = ::read(pid_pipe[0], &grandchild, sizeof grandchild);
    } while (n < 0 && errno == EINTR);
    ::close(pid_pipe[0]);
    int status = 0;
    while (::waitpid(first, &status, 0) < 0 && errno == EINTR) {
    }
    if (n != sizeof grandchild || grandchild <= 0) throw Error("cannot start the egress proxy in the background");
    return grandchild;
}

}  // namespace

std::vector<std::string> proxy_command(const std::string& self_exe, std::uint16_t port, const ProxyPaths& paths) {
    return {self_exe,   "egress-proxy", "--listen",   "127.0.0.1:" + std::to_string(port),
            "--policy", paths.policy,   "--pid-file", paths.pid_file,
            "--log",    paths.log};
}

int start_detached_proxy(const std::vector<std::string>& argv, const std::string& output, const std::string& pid_file,
                         std::uint16_t port, std::chrono::milliseconds timeout) {
    if (argv.empty() || argv[0].empty() || argv[0].front() != '/') {
        throw Error("internal error: the egress proxy needs an absolute path to the agentctl executable");
    }
    const int pid = spawn_detached(argv, output);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (!alive(pid)) {
            throw Error("the egress proxy exited during startup: " + tail(output),
                        "check that port " + std::to_string(port) + " on 127.0.0.1 is free");
        }
        if (read_pid(pid_file) == pid && loopback_port_listening(port)) return pid;
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    throw Error("the egress proxy did not start listening on 127.0.0.1:" + std::to_string(port) + " within " +
                    std::to_string(timeout.count()) + " ms: " + tail(output),
                "see " + output);
}

int running_proxy_pid(const std::string& pid_file) {
    int pid = read_pid(pid_file);
    return alive(pid) ? pid : 0;
}

bool stop_proxy(const std::string& pid_file, std::chrono::milliseconds grace) {
    int pid = running_proxy_pid(pid_file);
    bool stopped = false;
    if (pid > 0) {
        ::kill(pid, SIGTERM);
        const auto deadline = std::chrono::steady_clock::now() + grace;
        while (alive(pid) && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (alive(pid)) ::kill(pid, SIGKILL);
        stopped = true;
    }
    ::unlink(pid_file.c_str());
    return stopped;
}

}  // namespace agentctl::provider::lima
