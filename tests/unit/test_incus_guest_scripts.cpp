// The guest scripts are POSIX sh; the probe battery is run here with the
// host's own shell against real listeners and closed ports on loopback.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <fmt/format.h>

#include "agentctl/process.hpp"
#include "provider/common/probes.hpp"
#include "provider/incus/guest/guest_proxy_scripts.hpp"
#include "provider/incus/guest/guest_scripts.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;
namespace common = agentctl::provider::common;

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

// `timeout`: a bound for a stuck script, far above what the script takes on
// a loaded host (the probe battery: up to its per-probe timeout for each probe).
std::string run_sh(const std::string& script, std::chrono::seconds timeout = std::chrono::seconds(20)) {
    auto runner = make_real_process_runner();
    ProcessRequest request;
    request.argv = {"/bin/sh", "-c", script};
    request.timeout = timeout;
    return runner->run(request).out;
}

}  // namespace

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
    // Only the image's own sandbox user is ever moved to another uid.
    CHECK_THAT(script, Catch::Contains("grep -q \"^$u:[^:]*:[0-9]*:[0-9]*:agentctl sandbox user:\" /etc/passwd"));
    CHECK_THAT(script, Catch::Contains("usermod -u \"$pref\" -g \"$pref\" \"$u\""));
    // It is valid sh.
    auto runner = make_real_process_runner();
    ProcessRequest check;
    check.argv = {"/bin/sh", "-n", "-c", script};
    CHECK(runner->run(check).ok());
}

namespace {

// agentctl's own image: its sandbox user at 1500, marked by its comment.
const ImageAccounts k_own_image{
    "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/"
    "nologin\nagent:x:1500:1500:agentctl sandbox user:/home/agent:/bin/bash\n",
    "root:x:0:\nusers:x:100:\nnogroup:x:65534:\nagent:x:1500:\n"};

ImageAccounts with(ImageAccounts accounts, const std::string& passwd, const std::string& group) {
    accounts.passwd += passwd;
    accounts.group += group;
    return accounts;
}

std::string ids(const GuestUser& user) { return fmt::format("{} {}:{} {}", user.name, user.uid, user.gid, user.home); }

}  // namespace

TEST_CASE("the bootstrap's user is predicted from the image's accounts by the script's rule", "[guest]") {
    // The image's user as it is, renamed after an agent, or moved to the writable mounts' owner.
    CHECK(ids(predict_bootstrap_user(k_own_image, "agent", 1500)) == "agent 1500:1500 /home/agent");
    CHECK(ids(predict_bootstrap_user(k_own_image, "claude", 1500)) == "claude 1500:1500 /home/claude");
    CHECK(ids(predict_bootstrap_user(k_own_image, "claude", 1000)) == "claude 1000:1000 /home/claude");
    // The owner's id is taken (by a user, or by a group alone): the image's user keeps its own.
    const auto taken = with(k_own_image, "dev:x:1000:1000::/home/dev:/bin/sh\n", "dev:x:1000:\n");
    CHECK(ids(predict_bootstrap_user(taken, "claude", 1000)) == "claude 1500:1500 /home/claude");
    CHECK(ids(predict_bootstrap_user(with(k_own_image, "", "staff:x:1000:\n"), "agent", 1000)) ==
          "agent 1500:1500 /home/agent");
    // A user the image has already, not agentctl's: kept as it is.
    const auto has_dev = with(taken, "", "");
    CHECK(ids(predict_bootstrap_user(has_dev, "dev", 1500)) == "dev 1000:1000 /home/dev");
    // Another image: a new user at the first id from the preferred one that no user or group has.
    const ImageAccounts other{"root:x:0:0:root:/root:/bin/sh\nbob:x:1500:1500::/home/bob:/bin/sh\n",
                              "root:x:0:\nbob:x:1500:\nops:x:1501:\n"};
    CHECK(ids(predict_bootstrap_user(other, "agent", 1500)) == "agent 1502:1502 /home/agent");
    CHECK(ids(predict_bootstrap_user(other, "agent", 1000)) == "agent 1000:1000 /home/agent");
    // A group of the user's name joins it (useradd -g NAME).
    CHECK(ids(predict_bootstrap_user(with(other, "", "agent:x:1300:\n"), "agent", 1000)) ==
          "agent 1000:1300 /home/agent");
    // Lines that are not accounts are skipped.
    CHECK(ids(predict_bootstrap_user(ImageAccounts{"# comment\n\nbad:x:a:b:::\n", ""}, "agent", 1500)) ==
          "agent 1500:1500 /home/agent");
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
#include "provider/incus/network/host_ports.hpp"

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

namespace {

const common::ProbeResult* find_probe(const std::vector<common::ProbeResult>& results, const std::string& name) {
    for (const auto& r : results) {
        if (r.name == name) return &r;
    }
    return nullptr;
}

}  // namespace

TEST_CASE("the probe battery: a refused connection holds, an accepted one escapes", "[guest]") {
    Loopback open(true);
    Loopback closed(false);
    ProbeTargets targets;
    targets.gateway = "127.0.0.1";
    targets.proxy_port = static_cast<std::uint16_t>(closed.port);  // no proxy: inconclusive, not held
    targets.gateway_canary = static_cast<std::uint16_t>(closed.port);
    targets.other_host_address = "127.0.0.1";
    targets.other_canary = static_cast<std::uint16_t>(open.port);
    targets.unrouted = "127.0.0.1";
    const auto output = run_sh(probe_battery_script(targets, 2), std::chrono::seconds(120));
    const auto results = common::parse_probe_lines(output);
    INFO(output);
    REQUIRE(results.size() == probe_names().size());
    for (const auto& name : probe_names()) CHECK(find_probe(results, name) != nullptr);
    REQUIRE(find_probe(results, "host-port") != nullptr);
    CHECK(find_probe(results, "host-port")->verdict == common::ProbeVerdict::Held);
    CHECK(find_probe(results, "host-address")->verdict == common::ProbeVerdict::Escaped);
    CHECK_THAT(find_probe(results, "host-address")->detail, Catch::Contains("connected"));
    CHECK(find_probe(results, "proxy-denied-name")->verdict == common::ProbeVerdict::Inconclusive);
    const auto summary = common::summarise(results);
    CHECK(summary.escaped.size() >= 1);
    CHECK_THAT(to_string(common::confinement_line(summary, std::chrono::system_clock::now())),
               Catch::StartsWith("FAILED ("));
}

TEST_CASE("the probe battery reads a proxy's 403 as held and a 200 as an escape", "[guest]") {
    for (const auto& [answer, verdict] : std::vector<std::pair<std::string, common::ProbeVerdict>>{
             {"HTTP/1.1 403 Forbidden", common::ProbeVerdict::Held},
             {"HTTP/1.1 200 OK", common::ProbeVerdict::Escaped}}) {
        Loopback proxy(true);
        std::thread server([&proxy, answer = answer] {
            const int client = ::accept(proxy.fd, nullptr, nullptr);
            if (client < 0) return;
            char buffer[512];
            (void)::read(client, buffer, sizeof buffer);
            const auto reply = answer + "\r\n\r\n";
            (void)::write(client, reply.data(), reply.size());
            ::usleep(200000);
            ::close(client);
        });
        ProbeTargets targets;
        targets.gateway = "127.0.0.1";
        targets.proxy_port = static_cast<std::uint16_t>(proxy.port);
        const auto results = common::parse_probe_lines(run_sh(probe_battery_script(targets, 2)));
        server.join();
        const auto* probe = find_probe(results, "proxy-denied-name");
        REQUIRE(probe != nullptr);
        CHECK(probe->verdict == verdict);
        CHECK_THAT(probe->detail, Catch::Contains(answer));
    }
}

TEST_CASE("probe lines parse into typed results; a missing verdict word is inconclusive", "[guest]") {
    const auto results = common::parse_probe_lines(
        "noise\nagentctl-probe a held it was refused (x)\r\nagentctl-probe b escaped connected\n"
        "agentctl-probe c whatever\nagentctl-probe d\n");
    REQUIRE(results.size() == 3);
    CHECK(results[0].name == "a");
    CHECK(results[0].verdict == common::ProbeVerdict::Held);
    CHECK(results[0].detail == "it was refused (x)");
    CHECK(results[1].verdict == common::ProbeVerdict::Escaped);
    CHECK(results[2].verdict == common::ProbeVerdict::Inconclusive);
    const auto summary = common::summarise(results);
    CHECK(summary.held == 1);
    CHECK(summary.total == 3);
    const auto when = std::chrono::system_clock::from_time_t(1764504000);  // 2025-11-30T12:00:00Z
    std::vector<common::ProbeResult> all_held{{"a", common::ProbeVerdict::Held, "x"},
                                              {"b", common::ProbeVerdict::Held, "y"}};
    CHECK(to_string(common::confinement_line(common::summarise(all_held), when)) ==
          "verified (2/2 probes, 2025-11-30T12:00:00Z)");
    CHECK_THAT(to_string(common::confinement_line(summary, when)), Catch::StartsWith("FAILED (1/3 probes, "));
    CHECK_THAT(to_string(common::confinement_line(common::summarise({}), when)), Catch::Contains("printed no result"));
}

TEST_CASE("proxy settings: environment for every process, files for the tools that ignore it", "[guest]") {
    const auto env = proxy_environment(proxy_url("10.9.0.1", 3128));
    for (const auto* key : {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "npm_config_proxy",
                            "npm_config_https_proxy", "PIP_PROXY"}) {
        CHECK(env.at(key) == "http://10.9.0.1:3128");
    }
    CHECK(env.at("no_proxy") == "localhost,127.0.0.1,::1");
    const auto script = proxy_setup_script("10.9.0.1", 3128, "10.9.0.1");
    // With the proxy in a companion instance, the resolver stays on the bridge's address.
    CHECK_THAT(proxy_setup_script("10.9.0.3", 3128, "10.9.0.1"),
               Catch::Contains("nameserver %s\\n' \"$mark\" 10.9.0.1 >/etc/resolv.conf") &&
                   Catch::Contains("exec 3<>/dev/tcp/10.9.0.3/3128"));
    for (const auto* where :
         {"/etc/environment", "/etc/profile.d/agentctl-proxy.sh", "/etc/apt/apt.conf.d/90agentctl-proxy",
          "git config --system http.proxy", "/usr/etc/npmrc", "/etc/pip.conf",
          "/etc/ssh/ssh_config.d/90-agentctl-proxy.conf", "ProxyCommand /usr/local/bin/agentctl-connect %%h %%p",
          "exec 3<>/dev/tcp/10.9.0.1/3128", "nameserver %s\\n' \"$mark\" 10.9.0.1 >/etc/resolv.conf"}) {
        CHECK_THAT(script, Catch::Contains(where));
    }
    // It is valid sh.
    auto runner = make_real_process_runner();
    ProcessRequest request;
    request.argv = {"/bin/sh", "-n", "-c", script};
    CHECK(runner->run(request).exit_code == 0);
}

TEST_CASE("the proxy setup runs beside the main script; both outputs and the first failure come back", "[guest]") {
    auto run = [](const std::string& script) {
        auto runner = make_real_process_runner();
        ProcessRequest request;
        request.argv = {"/bin/sh", "-c", script};
        return runner->run(request);
    };
    auto both = run(with_proxy_setup("set -eu\necho main-done", "set -eu\nsleep 0.2\necho setup-done"));
    CHECK(both.exit_code == 0);
    CHECK(both.out == "main-done\nsetup-done\n");
    auto setup_fails = run(with_proxy_setup("echo main-done", "set -eu\nfalse\necho never"));
    CHECK(setup_fails.exit_code == 1);
    CHECK(setup_fails.out == "main-done\n");
    auto main_fails = run(with_proxy_setup("set -eu\nexit 3", "echo setup-done"));
    CHECK(main_fails.exit_code == 3);
}

TEST_CASE("a battery the guest ran says so in its line", "[incus][probe]") {
    const std::vector<common::ProbeResult> held{{"direct-bypass", common::ProbeVerdict::Held, "refused"}};
    const auto when = std::chrono::system_clock::time_point{};
    CHECK(to_string(common::confinement_line(common::summarise(held), when, common::k_guest_word)) ==
          "verified (1/1 probes, reported by the guest, 1970-01-01T00:00:00Z)");
    CHECK(to_string(common::confinement_line(common::summarise(held), when)) ==
          "verified (1/1 probes, 1970-01-01T00:00:00Z)");
}

TEST_CASE("with DNS disabled, the guest battery counts a refused resolver as held", "[incus][probe]") {
    ProbeTargets targets;
    targets.gateway = "10.9.0.1";
    targets.proxy_port = 3128;
    targets.dns_closed = true;
    const auto script = probe_battery_script(targets, 2);
    CHECK_THAT(script, Catch::Contains("dc=1;"));
    CHECK_THAT(script, Catch::Contains("\"1 refused\"|\"1 error\"*) say dns-denied-name held"));
    targets.dns_closed = false;
    CHECK_THAT(probe_battery_script(targets, 2), Catch::Contains("dc=0;"));
}
