// Who may hand a running proxy new secret values: root, and the one user
// `--secrets-peer-uid` names (the user agentctl runs as on Lima). The built
// agentctl runs as the proxy; a process of another user connects to its socket.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/files.hpp"
#include "egress_proxy/sandbox_ca.hpp"
#include "egress_proxy/secret_injection.hpp"
#include "egress_proxy/secret_rotation.hpp"
#include "support/temp_dir.hpp"
#include "support/build_paths.hpp"

using namespace agentctl;
namespace fs = std::filesystem;

namespace {

constexpr uid_t k_other = 65534;  // nobody

// `agentctl egress-proxy` on loopback with one secret on its stdin and its rotation socket in `dir`.
class RotatingProxy {
public:
    RotatingProxy(const fs::path& dir, const std::vector<std::string>& extra) : m_socket(dir / "secrets.sock") {
        fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
        const auto ca = egress_proxy::make_sandbox_ca("peer-test");
        const auto payload = egress_proxy::secret_payload_json(
            {ca.cert, ca.key, {{"github", "agentctl-secret-github-00", "ghp_first", {{"api.test", "authorization"}}}}});
        std::vector<std::string> args{agentctl::test::agentctl_binary(),
                                      "egress-proxy",
                                      "--listen",
                                      "127.0.0.1:0",
                                      "--policy",
                                      (dir / "p.json").string(),
                                      "--pid-file",
                                      (dir / "proxy.pid").string(),
                                      "--log",
                                      (dir / "log").string(),
                                      "--secrets-fd",
                                      "0",
                                      "--secrets-socket",
                                      m_socket.string()};
        args.insert(args.end(), extra.begin(), extra.end());
        int in[2];
        REQUIRE(::pipe(in) == 0);
        m_pid = ::fork();
        REQUIRE(m_pid >= 0);
        if (m_pid == 0) {
            ::dup2(in[0], 0);
            ::close(in[0]);
            ::close(in[1]);
            const int null = ::open("/dev/null", O_WRONLY);
            ::dup2(null, 1);
            ::dup2(null, 2);
            std::vector<char*> argv;
            for (auto& arg : args) argv.push_back(arg.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        ::close(in[0]);
        REQUIRE(::write(in[1], payload.data(), payload.size()) == static_cast<ssize_t>(payload.size()));
        ::close(in[1]);
        // Listening once its pid file is written; the socket is bound before that.
        for (int i = 0; i < 500 && !fs::exists(dir / "proxy.pid"); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        REQUIRE(fs::exists(m_socket));
        // The socket is 0600, its owner's: opened to everyone here so that only the proxy's own check decides.
        REQUIRE(::chmod(m_socket.c_str(), 0666) == 0);
    }
    ~RotatingProxy() {
        ::kill(m_pid, SIGTERM);
        int status = 0;
        ::waitpid(m_pid, &status, 0);
    }
    RotatingProxy(const RotatingProxy&) = delete;
    RotatingProxy& operator=(const RotatingProxy&) = delete;

    // The proxy's answer to a new value sent by a process of `uid`, or "" when it gave none.
    [[nodiscard]] std::string rotate_as(uid_t uid) const {
        const auto ca = egress_proxy::make_sandbox_ca("peer-test");
        const auto payload = egress_proxy::secret_payload_json(
            {ca.cert,
             ca.key,
             {{"github", "agentctl-secret-github-00", "ghp_second", {{"api.test", "authorization"}}}}});
        int out[2];
        REQUIRE(::pipe(out) == 0);
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            ::close(out[0]);
            if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(3);
            std::string answer;
            try {
                answer = egress_proxy::send_secret_rotation(m_socket.string(), payload);
            } catch (...) {
            }
            (void)!::write(out[1], answer.data(), answer.size());
            ::_exit(0);
        }
        ::close(out[1]);
        std::string answer;
        char buffer[256];
        ssize_t n = 0;
        while ((n = ::read(out[0], buffer, sizeof buffer)) > 0) answer.append(buffer, static_cast<std::size_t>(n));
        ::close(out[0]);
        int status = 0;
        ::waitpid(child, &status, 0);
        REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
        return answer;
    }

private:
    fs::path m_socket;
    pid_t m_pid = -1;
};

}  // namespace

TEST_CASE("the rotation socket takes new values from the user --secrets-peer-uid names, and no other", "[secrets]") {
    if (::geteuid() != 0) {
        WARN("skipped: needs root to act as another user");
        return;
    }
    {
        test::TempDir dir;
        RotatingProxy proxy(dir.path, {});
        CHECK(proxy.rotate_as(k_other).empty());  // root only: closed unanswered
        CHECK(proxy.rotate_as(0) == "rotated github");
    }
    {
        test::TempDir dir;
        RotatingProxy proxy(dir.path, {"--secrets-peer-uid", std::to_string(k_other)});
        CHECK(proxy.rotate_as(k_other) == "rotated github");
        CHECK(proxy.rotate_as(k_other + 1).empty());
    }
}
