// The guest scripts are POSIX sh; the probe is run here with the host's own
// shell against a real listener and a real closed port on loopback.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentctl/process.hpp"
#include "provider/incus/guest_scripts.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

// A loopback listener on a kernel-chosen port (or a bound-but-closed port).
struct Loopback {
    int fd = -1;
    unsigned port = 0;
    explicit Loopback(bool listening) {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        socklen_t len = sizeof addr;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
        port = ntohs(addr.sin_port);
        if (listening) ::listen(fd, 4);
    }
    ~Loopback() { ::close(fd); }
};

std::string run_sh(const std::string& script) {
    auto runner = make_real_process_runner();
    ProcessRequest request;
    request.argv = {"/bin/sh", "-c", script};
    request.timeout = std::chrono::seconds(20);
    return runner->run(request).out;
}

}  // namespace

TEST_CASE("the probe tells connected from refused", "[guest]") {
    Loopback open(true);
    Loopback closed(false);
    CHECK(parse_probe_output(run_sh(probe_script("127.0.0.1", open.port, 3))) == "connected");
    CHECK(parse_probe_output(run_sh(probe_script("127.0.0.1", closed.port, 3))) == "refused");
    CHECK(parse_probe_output("noise\nagentctl-probe timeout\n") == "timeout");
    CHECK(parse_probe_output("nothing").empty());
}

TEST_CASE("bootstrap output is parsed back into the user", "[guest]") {
    auto user = parse_bootstrap_output("useradd: warning\nagentctl-user agent 1500 1500 /home/agent /bin/bash\n");
    REQUIRE(user);
    CHECK(user->name == "agent");
    CHECK(user->uid == 1500);
    CHECK(user->gid == 1500);
    CHECK(user->home == "/home/agent");
    CHECK(user->shell == "/bin/bash");
    CHECK_FALSE(parse_bootstrap_output("error"));
    // The script quotes the user name and prefers the given uid.
    auto script = bootstrap_user_script("dev", 1500);
    CHECK_THAT(script, Catch::Contains("u=dev") && Catch::Contains("pref=1500") && Catch::Contains("NOPASSWD"));
    // It is valid sh.
    auto runner = make_real_process_runner();
    ProcessRequest check;
    check.argv = {"/bin/sh", "-n", "-c", script};
    CHECK(runner->run(check).ok());
}

TEST_CASE("package installs per manager", "[guest]") {
    CHECK(package_install_argv("apt", {"git", "ripgrep"})[2] ==
          "export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q --no-install-recommends "
          "git ripgrep");
    CHECK(package_install_argv("dnf", {"git"})[2] == "dnf install -y git");
    CHECK(package_install_argv("apk", {"git"})[2] == "apk add --no-cache git");
    CHECK(run_sh(detect_package_manager_script()) == "apt\n");  // this host is Debian
}

#include "agentctl/error.hpp"
#include "provider/incus/host_ports.hpp"

TEST_CASE("a host port in use is refused before Incus is asked", "[guest]") {
    Loopback taken(true);
    PortForward port{"127.0.0.1", static_cast<std::uint16_t>(taken.port), 80, "tcp"};
    CHECK_THROWS_WITH(check_host_port_free(port),
                      Catch::Contains("already in use") && Catch::Contains("127.0.0.1:" + std::to_string(taken.port)));
    const unsigned free_port = taken.port;
    ::close(taken.fd);
    taken.fd = ::socket(AF_INET, SOCK_STREAM, 0);  // the destructor closes this one
    port.host_port = static_cast<std::uint16_t>(free_port);
    CHECK_NOTHROW(check_host_port_free(port));
}
