// The lima provider end to end on Linux: the real provider code, the real
// process runner, the real egress proxy (the built agentctl), and contract
// fakes of limactl and sandbox-exec (tests/fakes/, which name their sources).
#include <thread>
#include <chrono>
#include <catch2/catch.hpp>

#include <algorithm>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "agentctl/error.hpp"
#include "egress_proxy/refusal_log.hpp"
#include "fakes/lima_fixture.hpp"
#include "provider/lima/proxy_process.hpp"

using namespace agentctl;
using lima_test::LimaWorld;
namespace fs = std::filesystem;

namespace {

SandboxSpec tbox_spec(const LimaWorld& world) {
    SandboxSpec spec;
    spec.name = "tbox";
    spec.image = "template://ubuntu-lts";
    spec.resources = {2, 4ull << 30, 20ull << 30};
    spec.mounts = {{world.workspace().string(), "/workspace", true, "profile default"}};
    spec.network.allow = {policy::parse_allow_entry("example.com:443", "--allow")};
    return spec;
}

// Sends one request head to 127.0.0.1:port and returns the status line.
std::string ask_proxy(std::uint16_t port, const std::string& request) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    std::string reply;
    char buf[4096];
    ssize_t n;
    while (reply.find("\r\n") == std::string::npos && (n = ::read(fd, buf, sizeof buf)) > 0) reply.append(buf, n);
    ::close(fd);
    return reply.substr(0, reply.find("\r\n"));
}

// A zombie waiting for init to reap it counts as gone.
bool process_alive(int pid) {
    if (pid <= 0 || ::kill(pid, 0) != 0) return false;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto paren = content.rfind(')');
    return paren == std::string::npos || paren + 2 >= content.size() || content[paren + 2] != 'Z';
}

}  // namespace

TEST_CASE("create runs one limactl create with every field and the forced ones", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));

    auto calls = world.calls();
    REQUIRE(calls.size() == 2);  // list (does it exist?), create
    CHECK(calls[0]["argv"] == nlohmann::json({"list", "tbox", "--json"}));
    CHECK(calls[1]["argv"][0] == "create");
    CHECK(calls[1]["argv"].back() == "template://ubuntu-lts");

    auto y = world.lima_yaml("tbox");
    CHECK(y["cpus"] == 2);
    CHECK(y["memory"] == "4GiB");
    CHECK(y["disk"] == "20GiB");
    // the template's home mount is gone: only the workspace remains
    REQUIRE(y["mounts"].size() == 1);
    CHECK(y["mounts"][0]["location"] == world.workspace().string());
    CHECK(y["mounts"][0]["mountPoint"] == "/workspace");
    CHECK(y["mounts"][0]["writable"] == true);
    CHECK(y["user"]["name"] == "agent");
    CHECK(y["user"]["passwordlessSudo"] == true);
    CHECK(y["ssh"]["forwardAgent"] == false);
    CHECK(y["ssh"]["forwardX11"] == false);
    CHECK(y["copyToHost"] == nlohmann::json::array());
    CHECK(y["networks"] == nlohmann::json::array());
    CHECK(y["propagateProxyEnv"] == false);

    auto state = world.state("tbox");
    const int ssh = state["sshPort"];
    const int proxy = state["proxyPort"];
    CHECK(ssh >= 49152);
    CHECK(proxy >= 49152);
    CHECK(ssh != proxy);
    CHECK(y["ssh"]["localPort"] == ssh);
    CHECK(y["env"]["https_proxy"] == "http://192.168.5.2:" + std::to_string(proxy));
    CHECK(y["env"]["HTTP_PROXY"] == "http://192.168.5.2:" + std::to_string(proxy));
    CHECK(state["unrestricted"] == false);

    auto policy_file =
        nlohmann::json::parse(core::read_file(provider::lima::egress_policy_path(world.state_dir(), "tbox")));
    CHECK(policy::from_policy_file(policy_file).allow.at(0).host == "example.com");
}

TEST_CASE("create of an existing name is refused cleanly", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    auto before = world.lima_yaml("tbox");
    CHECK_THROWS_WITH(provider->lifecycle().create(tbox_spec(world)),
                      Catch::Contains("sandbox \"tbox\" already exists"));
    CHECK(world.lima_yaml("tbox") == before);

    // a Lima instance of the user's own with that name is left alone
    auto spec = tbox_spec(world);
    spec.name = "mine";
    REQUIRE(world.run({"limactl", "create", "--name=mine", "--tty=false", "template://ubuntu-lts"}).ok());
    CHECK_THROWS_WITH(provider->lifecycle().create(spec),
                      Catch::Contains("already exists and was not created by agentctl"));
    CHECK(fs::exists(world.lima_home() / "mine" / "lima.yaml"));
    CHECK_FALSE(fs::exists(provider::lima::instance_state_dir(world.state_dir(), "mine")));
}

TEST_CASE("when --set is refused, create falls back to a bare create plus one edit per field", "[lima][fake]") {
    LimaWorld world;
    lima_test::ScopedEnv reject("FAKE_LIMACTL_REJECT_SET", "1");
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    auto verbs = world.verbs();
    // list, create --set (refused), list, bare create, then one edit per expression
    REQUIRE(verbs.size() > 5);
    CHECK(verbs[1] == "create");
    CHECK(verbs[3] == "create");
    auto calls = world.calls();
    for (const auto& arg : calls[3]["argv"]) CHECK(arg != "--set");
    std::size_t edits = 0;
    for (std::size_t i = 4; i < calls.size(); ++i) {
        CHECK(calls[i]["argv"][0] == "edit");
        CHECK(calls[i]["argv"][3] == "--set");
        ++edits;
    }
    CHECK(edits >= 10);
    auto y = world.lima_yaml("tbox");
    CHECK(y["mounts"].size() == 1);
    CHECK(y["user"]["name"] == "agent");
    CHECK(y["ssh"]["forwardAgent"] == false);
    CHECK(y["copyToHost"] == nlohmann::json::array());
    CHECK(world.reporter.text().find("creating the instance bare") != std::string::npos);
}

TEST_CASE("a create that fails part-way leaves nothing behind", "[lima][fake]") {
    LimaWorld world;
    lima_test::ScopedEnv reject("FAKE_LIMACTL_REJECT_SET", "1");
    lima_test::ScopedEnv fail("FAKE_LIMACTL_FAIL_EDIT", ".copyToHost");
    auto provider = world.provider();
    CHECK_THROWS_WITH(provider->lifecycle().create(tbox_spec(world)), Catch::Contains("cannot configure tbox"));
    CHECK_FALSE(fs::exists(world.lima_home() / "tbox"));
    CHECK_FALSE(fs::exists(provider::lima::instance_state_dir(world.state_dir(), "tbox")));
    CHECK(world.verbs().back() == "delete");
}

TEST_CASE("network.dns.servers is refused at create, disabled switches the host resolver off", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    auto spec = tbox_spec(world);
    spec.network.dns.servers = {"1.1.1.1"};
    CHECK_THROWS_WITH(provider->lifecycle().create(spec), Catch::Contains("cannot apply network.dns.servers"));
    CHECK(world.calls().empty());

    spec.network.dns.servers.clear();
    spec.network.dns.disabled = true;
    provider->lifecycle().create(spec);
    CHECK(world.lima_yaml("tbox")["hostResolver"]["enabled"] == false);
    CHECK(world.state("tbox")["dnsDisabled"] == true);
}

TEST_CASE("start confines the instance: proxy up and serving, sandboxed boot, verified probe", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    world.clear_output();
    provider->lifecycle().start("tbox", {});
    const std::string first_report = world.reporter.text();

    auto state = world.state("tbox");
    const std::uint16_t proxy_port = state["proxyPort"];
    const std::uint16_t ssh_port = state["sshPort"];
    const auto paths_pid = provider::lima::egress_pid_path(world.state_dir(), "tbox").string();

    // the proxy really runs, detached, at the pinned port, and serves: a
    // destination off the allowlist gets its 403
    const int proxy_pid = provider::lima::running_proxy_pid(paths_pid);
    REQUIRE(proxy_pid > 0);
    CHECK(::getsid(proxy_pid) != ::getsid(0));  // detached into its own session
    CHECK(ask_proxy(proxy_port, "CONNECT www.wikipedia.org:443 HTTP/1.1\r\nHost: www.wikipedia.org:443\r\n\r\n")
              .find(" 403 ") != std::string::npos);
    // The proxy writes its refusals to their own file of its log.
    std::string log;
    for (int i = 0; i < 100 && log.find("www.wikipedia.org") == std::string::npos; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        log =
            core::read_file(egress_proxy::refusal_log_path(provider::lima::egress_log_path(world.state_dir(), "tbox")));
    }
    CHECK(log.find("www.wikipedia.org") != std::string::npos);
    // ... and `agentctl logs tbox --network` reads that log
    world.clear_output();
    LogRequest logs;
    logs.json = true;
    CHECK(provider->egress_log()->logs("tbox", logs) == 0);
    CHECK(world.out.str().find("www.wikipedia.org") != std::string::npos);
    world.clear_output();
    provider->lifecycle().start("tbox", {});  // already running: a no-op report
    world.clear_output();

    // limactl start ran under sandbox-exec with the generated profile, which
    // allows exactly the SSH and proxy ports
    bool sandboxed_start = false;
    for (const auto& call : world.calls()) {
        if (call["argv"][0] == "start") {
            sandboxed_start = call["env"].value("FAKE_SANDBOX_ALLOWED_PORTS", "") ==
                              std::to_string(ssh_port) + "," + std::to_string(proxy_port);
            CHECK(call["env"]["HTTPS_PROXY"] == "http://127.0.0.1:" + std::to_string(proxy_port));
        }
    }
    CHECK(sandboxed_start);
    auto profile = world.last_profile();
    CHECK(profile.find("(allow network-outbound (remote ip \"localhost:" + std::to_string(proxy_port) + "\"))") !=
          std::string::npos);
    CHECK(profile.find("(remote unix-socket (subpath \"" + world.lima_home().string() + "\"))") != std::string::npos);

    // the report (of the first start): mounts first, then confinement
    auto out = first_report;
    CHECK(out.find("notice: host directories exposed to this sandbox:\n  " + world.workspace().string() +
                   " -> /workspace (writable)\n") != std::string::npos);
    CHECK(out.find("notice: network confinement verified: a direct connection from the guest to 192.168.5.2:") !=
          std::string::npos);
    CHECK(out.find("notice: network confinement verified") > out.find("/workspace (writable)"));

    // status shows Confinement while the hostagent agentctl started runs
    auto info = provider->lifecycle().status("tbox");
    CHECK(info.status == "Running");
    CHECK(info.confinement.state == ConfinementState::Verified);
    CHECK(to_string(info.confinement).rfind("verified: ", 0) == 0);
    REQUIRE(info.network);
    CHECK(info.network->allow.at(0).host == "example.com");
    CHECK(info.mounts.size() == 1);

    // a second start is a no-op that reports the same
    world.clear_output();
    provider->lifecycle().start("tbox", {});
    CHECK(world.reporter.text().find("already running") != std::string::npos);

    // stop takes the proxy down with the instance
    const int hostagent = state["hostagentPid"];
    CHECK(process_alive(hostagent));
    provider->lifecycle().stop("tbox", {});
    CHECK_FALSE(process_alive(proxy_pid));
    CHECK_FALSE(fs::exists(paths_pid));
    CHECK(world.state("tbox")["hostagentPid"] == 0);
    CHECK(provider->lifecycle().status("tbox").status == "Stopped");
    CHECK(provider->lifecycle().status("tbox").confinement.empty());

    // delete removes the instance, the proxy state and the policy
    provider->lifecycle().start("tbox", {});
    const int proxy_again = provider::lima::running_proxy_pid(paths_pid);
    CHECK(proxy_again > 0);
    CHECK_THROWS_WITH(provider->lifecycle().remove("tbox", false), Catch::Contains("is running"));
    provider->lifecycle().remove("tbox", true);
    CHECK_FALSE(process_alive(proxy_again));
    CHECK_FALSE(fs::exists(world.lima_home() / "tbox"));
    CHECK_FALSE(fs::exists(provider::lima::instance_state_dir(world.state_dir(), "tbox")));
}

TEST_CASE("a guest that gets out is stopped and start fails", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    // A sandbox whose profile has no effect runs limactl start unconfined, so the
    // fake hostagent lets the probe reach agentctl's listener.
    world.platform.sandbox_exec = lima_test::fakes_dir() + "/sandbox-exec-ineffective";
    CHECK_THROWS_WITH(provider->lifecycle().start("tbox", {}),
                      Catch::Contains("network confinement failed: the guest connected directly to 192.168.5.2:") &&
                          Catch::Contains("the instance was stopped"));
    CHECK(world.verbs().back() == "stop");
    CHECK(provider->lifecycle().status("tbox").status == "Stopped");
    CHECK(provider::lima::running_proxy_pid(provider::lima::egress_pid_path(world.state_dir(), "tbox").string()) == 0);
}

TEST_CASE("a writable mount swapped for a symlink while stopped is refused at start, before limactl starts",
          "[lima][fake][mounts]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    // While the sandbox is stopped, its writable workspace becomes a symlink to ~/.ssh.
    fs::create_directories(world.home() / ".ssh");
    fs::remove_all(world.workspace());
    fs::create_directory_symlink(world.home() / ".ssh", world.workspace());
    CHECK_THROWS_WITH(provider->lifecycle().start("tbox", {}), Catch::Contains(world.workspace().string()));
    const auto verbs = world.verbs();
    CHECK(std::count(verbs.begin(), verbs.end(), "start") == 0);  // limactl was never asked to start it
    CHECK(provider->lifecycle().status("tbox").status == "Stopped");

    // --preview refuses the same way
    world.context().preview = true;
    CHECK_THROWS_WITH(world.provider()->lifecycle().start("tbox", {}), Catch::Contains(world.workspace().string()));
}

TEST_CASE("a guest without curl, bash+timeout or python3 is reported as not verified", "[lima][fake]") {
    LimaWorld world;
    lima_test::ScopedEnv tools("FAKE_LIMA_GUEST_TOOLS", "");
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    provider->lifecycle().start("tbox", {});
    CHECK(world.reporter.text().find("notice: network confinement not verified: the guest has none of curl, bash with "
                                     "timeout, or python3") != std::string::npos);
    CHECK(to_string(provider->lifecycle().status("tbox").confinement).rfind("not verified: ", 0) == 0);
}

TEST_CASE("exec passes the exit code through, --root runs under sudo -n", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    provider->lifecycle().start("tbox", {});
    world.clear_output();
    ExecRequest request;
    request.argv = {"sh", "-c", "echo hello; exit 7"};
    CHECK(provider->commands()->exec("tbox", request) == 7);
    CHECK(world.out.str() == "hello\n");
    request.argv = {"true"};
    request.root = true;
    CHECK(provider->commands()->exec("tbox", request) == 0);
    CHECK(world.calls().back()["argv"] == nlohmann::json({"shell", "tbox", "--", "sudo", "-n", "true"}));
    request.root = false;
    request.argv = {"sh", "-c", "kill -TERM $$"};
    CHECK(provider->commands()->exec("tbox", request) == 128 + SIGTERM);
    // -w: limactl shell --workdir; a directory the guest lacks fails as `cd DIR || exit 1` does.
    world.clear_output();
    request.argv = {"pwd"};
    request.cwd = "/";
    CHECK(provider->commands()->exec("tbox", request) == 0);
    CHECK(world.out.str() == "/\n");
    CHECK(world.calls().back()["argv"] == nlohmann::json({"shell", "--workdir", "/", "tbox", "--", "pwd"}));
    request.cwd = "/nonexistent-agentctl-dir";
    CHECK(provider->commands()->exec("tbox", request) == 1);
}

TEST_CASE("start --mount replaces the sticky mount set", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    StartRequest request;
    request.mounts = std::vector<Mount>{};
    provider->lifecycle().start("tbox", request);
    CHECK(world.lima_yaml("tbox")["mounts"] == nlohmann::json::array());
    CHECK(world.state("tbox")["mounts"] == nlohmann::json::array());
    CHECK(world.reporter.text().find("notice: no host directories are exposed to this sandbox.\n") !=
          std::string::npos);
}

TEST_CASE("create --no-network-policy means a plain limactl start, recorded at create", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    auto spec = tbox_spec(world);
    spec.network.enabled = false;
    provider->lifecycle().create(spec);
    CHECK(world.state("tbox")["unrestricted"] == true);
    CHECK_FALSE(world.lima_yaml("tbox").contains("env"));
    world.platform.macos = false;  // works on any host: nothing to confine
    provider->lifecycle().start("tbox", {});
    CHECK(world.last_profile().empty());
    CHECK(provider::lima::running_proxy_pid(provider::lima::egress_pid_path(world.state_dir(), "tbox").string()) == 0);
    CHECK(world.reporter.text().find("warning: sandbox \"tbox\" has no network policy") != std::string::npos);
    CHECK(to_string(provider->lifecycle().status("tbox").confinement) == "off (created with --no-network-policy)");
}

TEST_CASE("on a host that is not macOS a confined start is refused before anything runs", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    const auto before = world.calls().size();
    world.platform.macos = false;
    try {
        provider->lifecycle().start("tbox", {});
        FAIL("start should have been refused");
    } catch (const Error& e) {
        CHECK(e.code() == exit_code::k_not_available);
        CHECK(std::string(e.what()).find("only confine a sandbox on macOS") != std::string::npos);
    }
    CHECK(world.calls().size() == before);
}

TEST_CASE("capabilities follow the Known gaps table", "[lima]") {
    lima_test::FakePlatform mac;
    auto m = provider::lima::capabilities(mac);
    CHECK(m.get("create").status == CapabilityStatus::Supported);
    CHECK(m.get("network.acl").status == CapabilityStatus::Supported);
    CHECK(m.get("snapshot.create").status == CapabilityStatus::NotAvailable);
    CHECK(m.get("image.pull").status == CapabilityStatus::NotAvailable);
    CHECK(m.get("image.build").status == CapabilityStatus::UnderDevelopment);
    CHECK(m.get("view").status == CapabilityStatus::UnderDevelopment);
    lima_test::FakePlatform linux_host;
    linux_host.macos = false;
    auto l = provider::lima::capabilities(linux_host);
    CHECK(l.get("network.acl").status == CapabilityStatus::NotAvailable);
    CHECK(l.get("network.deny-lan").status == CapabilityStatus::NotAvailable);
    CHECK(l.get("network.acl").message.find("incus provider") != std::string::npos);
}

TEST_CASE("create --agent starts the sandbox and installs the agent as the default user, a failure is retried",
          "[lima][fake]") {
    LimaWorld world;
    // The "guest" is this machine: a stand-in curl first on PATH serves the
    // installer, so nothing leaves the machine.
    auto bin = world.home() / "guest-bin";
    fs::create_directories(bin);
    core::write_file_atomic(bin / "curl",
                            "#!/bin/sh\n"
                            "echo \"$@\" >> \"$HOME/curl-calls\"\n"
                            "[ -f \"$HOME/installer-down\" ] && exit 22\n"
                            "echo 'echo agent installed'\n",
                            0755);
    lima_test::ScopedEnv path("PATH", bin.string() + ":" + std::getenv("PATH"));
    lima_test::ScopedEnv probe_tools("FAKE_LIMA_GUEST_TOOLS", "python3");  // the probe must not use the stand-in
    core::write_file_atomic(world.home() / "installer-down", "");
    auto provider = world.provider();
    auto spec = tbox_spec(world);
    spec.agent = "claude";
    try {
        provider->lifecycle().create(spec);
        FAIL("the failed install should fail create");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find(
                  "installing claude in \"tbox\" failed while running the installer (exit code 22)") !=
              std::string::npos);
        CHECK(e.hint().find("`agentctl start tbox` retries the install") != std::string::npos);
    }
    CHECK(world.state("tbox")["agent"] == "claude");
    CHECK(world.state("tbox")["agentInstalled"] == false);
    CHECK(world.calls().back()["argv"] == nlohmann::json({"shell", "tbox", "--", "bash", "-o", "pipefail", "-c",
                                                          "curl -fsSL https://claude.ai/install.sh | bash"}));

    fs::remove(world.home() / "installer-down");
    provider->lifecycle().stop("tbox", {});
    provider->lifecycle().start("tbox", {});
    CHECK(world.state("tbox")["agentInstalled"] == true);
    CHECK(core::read_file(world.home() / "curl-calls").find("https://claude.ai/install.sh") != std::string::npos);
    CHECK(provider->lifecycle().status("tbox").extra.back() ==
          std::make_pair(std::string("Agent"), std::string("claude (installed)")));
}

TEST_CASE("a new policy is written atomically and the running proxy keeps serving", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    provider->lifecycle().start("tbox", {});
    const auto pid_file = provider::lima::egress_pid_path(world.state_dir(), "tbox").string();
    const int proxy = provider::lima::running_proxy_pid(pid_file);
    policy::NetworkPolicy network;
    network.allow = {policy::parse_allow_entry("pypi.org:443", "--allow")};
    provider->egress_policy()->apply_network_policy("tbox", network);
    auto written = policy::from_policy_file(
        nlohmann::json::parse(core::read_file(provider::lima::egress_policy_path(world.state_dir(), "tbox"))));
    REQUIRE(written.allow.size() == 1);
    CHECK(written.allow[0].host == "pypi.org");
    CHECK(provider::lima::running_proxy_pid(pid_file) == proxy);
    const std::uint16_t port = world.state("tbox")["proxyPort"];
    // (a destination neither policy allows: nothing is ever dialled)
    CHECK(ask_proxy(port, "CONNECT www.wikipedia.org:443 HTTP/1.1\r\nHost: www.wikipedia.org:443\r\n\r\n")
              .find(" 403 ") != std::string::npos);
    network.dns.servers = {"9.9.9.9"};
    CHECK_THROWS_WITH(provider->egress_policy()->apply_network_policy("tbox", network),
                      Catch::Contains("network.dns.servers"));
}
