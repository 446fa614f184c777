#include "provider/common/proxy_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "egress_proxy/proxy_arguments.hpp"
#include "provider/common/command_output.hpp"
#include "provider/common/process_identity.hpp"

namespace agentctl::provider::common {
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
        return output_tail(core::read_file_if_exists(path).value_or(""), max_bytes);
    } catch (...) {
        return {};
    }
}

void child_fail(const char* msg, int code) {
    ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
    (void)ignored;
    ::_exit(code);
}

// In the child, before exec: joins each cgroup (writing 0 moves the writer).
bool join_cgroups(const std::vector<std::string>& cgroups) {
    for (const auto& procs : cgroups) {
        const int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
        const bool ok = fd >= 0 && ::write(fd, "0", 1) == 1;
        if (fd >= 0) ::close(fd);
        if (!ok) return false;
    }
    return true;
}

// In the child: becomes `run_as`, keeping `capabilities` (permitted,
// inheritable and ambient, so that they survive the exec) and nothing else.
bool drop_privileges(const Credentials& run_as, const std::vector<int>& capabilities) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(run_as.gid) != 0) return false;
    if (!capabilities.empty() && ::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return false;
    if (::setuid(run_as.uid) != 0 || (run_as.uid != 0 && ::setuid(0) == 0)) return false;
    if (capabilities.empty()) return true;
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    for (int cap : capabilities) {
        data[cap / 32].permitted |= 1U << (cap % 32);
        data[cap / 32].effective |= 1U << (cap % 32);
        data[cap / 32].inheritable |= 1U << (cap % 32);
    }
    if (::syscall(SYS_capset, &header, data) != 0) return false;
    for (int cap : capabilities) {
        if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0) return false;
    }
    return ::prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) == 0;
}

// A pipe holding `input` (written whole before the child exists, so nobody
// waits on anybody: the write end does not block, a pipe smaller than `input`
// is an error), its read end returned; -1 for no input.
int input_pipe(const std::string& input) {
    if (input.empty()) return -1;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
    const bool nonblocking = ::fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0;
    const ssize_t written = nonblocking && input.size() <= 65536 ? ::write(fds[1], input.data(), input.size()) : -1;
    ::close(fds[1]);
    if (written != static_cast<ssize_t>(input.size())) {
        ::close(fds[0]);
        throw Error("cannot hand the egress proxy its secrets: they do not fit a pipe (64 KiB)",
                    "bind fewer or shorter secrets to the sandbox");
    }
    return fds[0];
}

// The environment a detached process starts with: a fixed PATH and the
// sanitizers' options, never the caller's own (a token in the shell that ran
// agentctl must not live on in a process that runs for the sandbox's lifetime).
std::vector<std::string> detached_environment() {
    std::vector<std::string> env{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
    for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"}) {
        if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
    }
    return env;
}

}  // namespace

int spawn_detached(const std::vector<std::string>& argv, const SpawnOptions& options) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const auto environment = detached_environment();
    std::vector<char*> envp;
    for (const auto& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    int pid_pipe[2];
    if (::pipe(pid_pipe) != 0) throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
    ::fcntl(pid_pipe[0], F_SETFD, FD_CLOEXEC);
    ::fcntl(pid_pipe[1], F_SETFD, FD_CLOEXEC);
    const char* out_path = options.output.c_str();
    const char* dir = options.working_dir.empty() ? nullptr : options.working_dir.c_str();
    const auto run_as = options.run_as;
    const auto& capabilities = options.capabilities;
    const auto& cgroups = options.cgroups;
    const int input_fd = input_pipe(options.input);

    pid_t first = ::fork();
    if (first < 0) {
        ::close(pid_pipe[0]);
        ::close(pid_pipe[1]);
        if (input_fd >= 0) ::close(input_fd);
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
        int out_fd = ::open(out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        // The input goes on fd 0 itself (close_range below closes the pipe's
        // own descriptor); already there, it must not close on exec.
        if (input_fd == STDIN_FILENO) {
            ::fcntl(STDIN_FILENO, F_SETFD, 0);
        } else if (input_fd >= 0) {
            ::dup2(input_fd, STDIN_FILENO);
        } else if (null_fd >= 0) {
            ::dup2(null_fd, STDIN_FILENO);
        }
        if (out_fd >= 0) {
            ::dup2(out_fd, STDOUT_FILENO);
            ::dup2(out_fd, STDERR_FILENO);
        }
        // Nothing else of the caller's goes along: a descriptor it holds (a
        // lock, a socket, a file it is writing) must not live on in a process
        // that runs for the sandbox's lifetime, as another user.
        ::close_range(3, ~0U, 0);
        if (!join_cgroups(cgroups)) child_fail("agentctl: cannot join the sandbox's cgroup\n", 126);
        if (dir != nullptr && ::chdir(dir) != 0) child_fail("agentctl: cannot enter the proxy's directory\n", 126);
        if (run_as && !drop_privileges(*run_as, capabilities)) {
            child_fail("agentctl: cannot drop privileges for the egress proxy\n", 126);
        }
        ::execve(args[0], args.data(), envp.data());
        child_fail("agentctl: cannot run the egress proxy executable\n", 127);
    }
    ::close(pid_pipe[1]);
    if (input_fd >= 0) ::close(input_fd);
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

bool tcp_port_listening(const std::string& address, std::uint16_t port) {
    sockaddr_storage storage{};
    socklen_t length = 0;
    auto* in4 = reinterpret_cast<sockaddr_in*>(&storage);
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
    if (::inet_pton(AF_INET, address.c_str(), &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        length = sizeof *in4;
    } else if (::inet_pton(AF_INET6, address.c_str(), &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        length = sizeof *in6;
    } else {
        return false;
    }
    const int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&storage), length) == 0;
    ::close(fd);
    return ok;
}

int start_detached_proxy(const std::vector<std::string>& argv, const SpawnOptions& options, const std::string& pid_file,
                         const std::string& address, std::uint16_t port, std::chrono::milliseconds timeout) {
    if (argv.empty() || argv[0].empty() || argv[0].front() != '/') {
        throw Error("internal error: the egress proxy needs an absolute path to the agentctl executable");
    }
    const int pid = spawn_detached(argv, options);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const auto where = address + ":" + std::to_string(port);
    for (;;) {
        if (!alive(pid)) {
            throw Error("the egress proxy exited during startup: " + tail(options.output),
                        "check that port " + where + " is free");
        }
        if ((pid_file.empty() || read_pid(pid_file) == pid) && tcp_port_listening(address, port)) return pid;
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(pid, SIGKILL);
    throw Error("the egress proxy did not start listening on " + where + " within " + std::to_string(timeout.count()) +
                    " ms: " + tail(options.output),
                "see " + options.output);
}

int running_proxy_pid(const std::string& pid_file, const PidCheck& is_ours) {
    int pid = read_pid(pid_file);
    if (!alive(pid)) return 0;
    if (is_ours && !is_ours(pid)) return 0;
    return pid;
}

std::optional<bool> stop_proxy(const std::string& pid_file, std::chrono::milliseconds grace, const PidCheck& is_ours) {
    const int pid = running_proxy_pid(pid_file, is_ours);
    std::optional<bool> gone;
    if (pid > 0) gone = terminate(pid, grace, [pid] { return alive(pid); });
    ::unlink(pid_file.c_str());
    return gone;
}

bool process_has_argument(int pid, std::string_view argument) {
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    std::size_t start = 0;
    while (start < content.size()) {
        auto end = content.find('\0', start);
        if (end == std::string::npos) end = content.size();
        if (std::string_view(content).substr(start, end - start) == argument) return true;
        start = end + 1;
    }
    return false;
}

bool is_egress_proxy_in(int pid, const std::string& working_dir) {
    std::error_code ec;
    const auto cwd = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec);
    if (ec || cwd != std::filesystem::path(working_dir)) return false;
    return process_has_argument(pid, egress_proxy::k_verb);
}

}  // namespace agentctl::provider::common
