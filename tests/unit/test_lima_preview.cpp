// --preview: every limactl call, the proxy launch and the full sandbox-exec
// command line, from the same builders as the real run, and nothing run.
#include <catch2/catch.hpp>

#include "fakes/lima_fixture.hpp"
#include "provider/lima/limactl_commands.hpp"
#include "support/build_paths.hpp"

using namespace agentctl;
using lima_test::LimaWorld;

namespace {

SandboxSpec tbox_spec(const LimaWorld& world) {
    SandboxSpec spec;
    spec.name = "tbox";
    spec.mounts = {{world.workspace().string(), "/workspace", true, "profile default"}};
    return spec;
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start < text.size()) {
        auto end = text.find('\n', start);
        out.push_back(text.substr(start, end - start));
        start = end == std::string::npos ? text.size() : end + 1;
    }
    return out;
}

}  // namespace

TEST_CASE("preview create prints the one limactl create and changes nothing", "[lima][fake][preview]") {
    LimaWorld world;
    world.context().preview = true;
    world.provider()->lifecycle().create(tbox_spec(world));
    auto out = lines(world.out.str());
    REQUIRE(out.size() == 1);
    CHECK(out[0].rfind("limactl create --name=tbox --tty=false --set '.mounts = [] | .mounts += [", 0) == 0);
    CHECK(out[0].find("--set '.user.name = \"agent\"'") != std::string::npos);
    CHECK(out[0].find(" template://ubuntu-lts") != std::string::npos);
    CHECK(world.calls().empty());
    CHECK_FALSE(std::filesystem::exists(provider::lima::instance_state_dir(world.state_dir(), "tbox")));
}

TEST_CASE("preview start shows the edit, the proxy launch, the sandboxed start and the probe",
          "[lima][fake][preview]") {
    LimaWorld world;
    world.provider()->lifecycle().create(tbox_spec(world));
    const auto calls_before = world.calls().size();
    auto state = world.state("tbox");
    const std::string proxy_port = std::to_string(state["proxyPort"].get<int>());
    const std::string ssh_port = std::to_string(state["sshPort"].get<int>());

    world.context().preview = true;
    world.provider()->lifecycle().start("tbox", {});
    auto out = lines(world.out.str());
    REQUIRE(out.size() == 4);  // one command per line
    CHECK(out[0].rfind("limactl edit tbox --tty=false --set '.networks = [] | .ssh.localPort = " + ssh_port, 0) == 0);
    CHECK(out[1] == shell_join(provider::lima::proxy_command(
                        agentctl::test::agentctl_binary(), static_cast<std::uint16_t>(std::stoi(proxy_port)),
                        {provider::lima::egress_policy_path(world.state_dir(), "tbox").string(),
                         provider::lima::egress_pid_path(world.state_dir(), "tbox").string(),
                         provider::lima::egress_log_path(world.state_dir(), "tbox").string(),
                         provider::lima::egress_secrets_socket_path(world.state_dir(), "tbox").string()})));
    CHECK(out[1].find(" egress-proxy --listen 127.0.0.1:" + proxy_port + " --policy ") != std::string::npos);
    // the full profile is on the sandbox-exec command line (quoted, with its newlines)
    CHECK(out[2].rfind("env HTTPS_PROXY=http://127.0.0.1:" + proxy_port, 0) == 0);
    CHECK(out[2].find(world.platform.sandbox_exec + " -p '(version 1)") != std::string::npos);
    CHECK(world.out.str().find("(allow network-outbound (remote ip \"localhost:" + proxy_port + "\"))") !=
          std::string::npos);
    CHECK(world.out.str().find("' limactl start --tty=false tbox\n") != std::string::npos);
    CHECK(out[3].rfind("limactl shell tbox -- sh -c 'h=192.168.5.2; p=<canary-port>; ", 0) == 0);
    // the mount report says what the real start would expose
    CHECK(world.reporter.text().find("notice: host directories exposed to this sandbox:\n  " +
                                     world.workspace().string() + " -> /workspace (writable)\n") != std::string::npos);
    // nothing ran
    CHECK(world.calls().size() == calls_before);
    CHECK(world.last_profile().empty());

    // with --mount: the requested set, not the sticky one
    world.clear_output();
    StartRequest request;
    request.mounts = std::vector<Mount>{};
    world.provider()->lifecycle().start("tbox", request);
    CHECK(world.reporter.text().find("notice: no host directories are exposed to this sandbox.\n") !=
          std::string::npos);
    CHECK(world.state("tbox")["mounts"].size() == 1);  // the preview recorded nothing
}

TEST_CASE("preview of stop, delete, exec and shell", "[lima][fake][preview]") {
    LimaWorld world;
    world.provider()->lifecycle().create(tbox_spec(world));
    world.context().preview = true;
    auto provider = world.provider();
    provider->lifecycle().stop("tbox", {});
    provider->lifecycle().remove("tbox", true);
    ExecRequest exec;
    exec.argv = {"whoami"};
    exec.root = true;
    CHECK(provider->commands()->exec("tbox", exec) == 0);
    CHECK(provider->commands()->shell("tbox", true) == 0);
    CHECK(world.out.str() ==
          "limactl stop tbox\n"
          "limactl delete --force tbox\n"
          "limactl shell tbox -- sudo -n whoami\n"
          "limactl shell tbox -- sudo -i\n");
    CHECK(std::filesystem::exists(world.lima_home() / "tbox"));
}

TEST_CASE("a bare self path is looked up on PATH for the detached proxy", "[lima][fake][preview]") {
    LimaWorld world;
    world.provider()->lifecycle().create(tbox_spec(world));
    auto bin = world.home() / "bin";
    std::filesystem::create_directories(bin);
    core::write_file_atomic(bin / "agentctl", "#!/bin/sh\n", 0755);
    lima_test::ScopedEnv path("PATH", bin.string() + ":" + std::getenv("PATH"));
    world.context().self_exe = "agentctl";
    world.context().preview = true;
    world.provider()->lifecycle().start("tbox", {});
    CHECK(lines(world.out.str()).at(1).rfind((bin / "agentctl").string() + " egress-proxy --listen 127.0.0.1:", 0) ==
          0);
}
