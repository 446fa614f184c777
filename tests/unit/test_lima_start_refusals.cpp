// Every refusal of `agentctl start`, each from its own fixture: Lima's
// ~/.lima/_config/default.yaml / override.yaml (merged into the effective
// configuration, lima-vm/lima pkg/limayaml/load.go), a launchd plist of
// `limactl autostart`, or an instance started behind agentctl's back.
// Each refusal must happen before anything is started.
#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "fakes/lima_fixture.hpp"
#include "support/error_text.hpp"

using namespace agentctl;
using lima_test::LimaWorld;
namespace fs = std::filesystem;

namespace {

SandboxSpec tbox_spec(const LimaWorld& world) {
    SandboxSpec spec;
    spec.name = "tbox";
    spec.mounts = {{world.workspace().string(), "/workspace", true, "profile default"}};
    spec.network.allow = {policy::parse_allow_entry("example.com:443", "--allow")};
    return spec;
}

// Creates the sandbox, applies `setup`, starts, and returns the error text;
// checks that neither the proxy nor limactl start ran.
std::string refused_start(LimaWorld& world, const std::function<void()>& setup) {
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    setup();
    const auto message = test::error_and_hint_of([&] { provider->lifecycle().start("tbox", {}); });
    for (const auto& call : world.calls()) {
        if (call["argv"][0] == "start" && call["env"].contains("FAKE_SANDBOX_ALLOWED_PORTS")) {
            FAIL("limactl start ran under agentctl despite the refusal");
        }
    }
    CHECK(provider::lima::running_proxy_pid(provider::lima::egress_pid_path(world.state_dir(), "tbox").string()) == 0);
    CHECK(message.find("refusing to start Lima instance \"tbox\":") == 0);
    CHECK(message.find("see Troubleshooting in docs/setup-lima.md") != std::string::npos);
    return message;
}

}  // namespace

TEST_CASE("refused: Lima cannot load the configuration (\"config\": null)", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] {
        agentctl::core::write_file_atomic(world.lima_home() / "_config" / "override.yaml", "mounts: [unclosed");
    });
    CHECK(msg.find("`limactl list --json` gave no effective configuration for it (\"config\": null), so agentctl "
                   "cannot verify its mounts, forwards and network; Lima says: failed to load YAML file") !=
          std::string::npos);
}

TEST_CASE("refused: default.yaml adds a mount", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] {
        world.lima_config("default.yaml", {{"mounts", {{{"location", "~/Documents"}}}}});
    });
    CHECK(msg.find("Lima would also mount " + world.home().string() + "/Documents at " + world.home().string() +
                   "/Documents (read-only), which is not one of this sandbox's mounts") != std::string::npos);
}

TEST_CASE("refused: override.yaml makes the workspace's host directory a different one", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] {
        fs::create_directories(world.home() / "elsewhere");
        world.lima_config(
            "override.yaml",
            {{"mounts", {{{"location", (world.home() / "elsewhere").string()}, {"mountPoint", "/workspace"}}}}});
    });
    CHECK(msg.find("at /workspace, where this sandbox mounts " + world.workspace().string()) != std::string::npos);
}

TEST_CASE("refused: override.yaml makes a read-only mount writable", "[lima][fake][refusal]") {
    LimaWorld world;
    auto provider = world.provider();
    auto spec = tbox_spec(world);
    spec.mounts[0].writable = false;
    provider->lifecycle().create(spec);
    world.lima_config("override.yaml", {{"mounts", {{{"location", world.workspace().string()}, {"writable", true}}}}});
    CHECK_THROWS_WITH(provider->lifecycle().start("tbox", {}),
                      Catch::Contains("/workspace writable, but this sandbox mounts it read-only"));
}

TEST_CASE("refused: a writable mount over agentctl's state directory", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] {
        world.lima_config("default.yaml", {{"mounts", {{{"location", "~"}, {"writable", true}}}}});
    });
    CHECK(msg.find("which covers agentctl's state directory " + world.state_dir()) != std::string::npos);
}

TEST_CASE("refused: override.yaml turns SSH agent forwarding on", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] { world.lima_config("override.yaml", {{"ssh", {{"forwardAgent", true}}}}); });
    CHECK(msg.find("Lima would forward your SSH agent into the sandbox (ssh.forwardAgent: true)") != std::string::npos);
}

TEST_CASE("default.yaml cannot turn forwarding on: create set it false", "[lima][fake]") {
    LimaWorld world;
    world.lima_config("default.yaml", {{"ssh", {{"forwardAgent", true}, {"forwardX11", true}}}});
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    provider->lifecycle().start("tbox", {});
    CHECK(provider->lifecycle().status("tbox").status == "Running");
}

TEST_CASE("refused: override.yaml turns X11 forwarding on", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] { world.lima_config("override.yaml", {{"ssh", {{"forwardX11", true}}}}); });
    CHECK(msg.find("(ssh.forwardX11: true)") != std::string::npos);
}

TEST_CASE("refused: a reverse port forward", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] {
        world.lima_config(
            "default.yaml",
            {{"portForwards",
              {{{"guestSocket", "/run/docker.sock"}, {"hostSocket", "/var/run/docker.sock"}, {"reverse", true}}}}});
    });
    CHECK(msg.find("forwards /var/run/docker.sock to /run/docker.sock in the guest (reverse: true)") !=
          std::string::npos);
}

TEST_CASE("refused: copyToHost from Lima's _config", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] {
        world.lima_config("override.yaml", {{"copyToHost", {{{"guest", "/etc/shadow"}, {"host", "/tmp/x"}}}}});
    });
    CHECK(msg.find("Lima would copy /etc/shadow out of the guest onto your host at /tmp/x (copyToHost)") !=
          std::string::npos);
}

TEST_CASE("a template's own copyToHost is cleared at create", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    auto spec = tbox_spec(world);
    spec.image = "template://k3s";
    provider->lifecycle().create(spec);
    CHECK(world.lima_yaml("tbox")["copyToHost"] == nlohmann::json::array());
    provider->lifecycle().start("tbox", {});
    CHECK(provider->lifecycle().status("tbox").status == "Running");
}

TEST_CASE("refused: an additional network from override.yaml", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] { world.lima_config("override.yaml", {{"networks", {{{"vzNAT", true}}}}}); });
    CHECK(msg.find("Lima would attach the additional network \"vzNAT\"") != std::string::npos);
}

TEST_CASE("a network in the instance's own configuration is removed by start", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    provider->lifecycle().create(tbox_spec(world));
    REQUIRE(
        world.run({"limactl", "edit", "tbox", "--tty=false", "--set", ".networks += [{\"lima\": \"shared\"}]"}).ok());
    provider->lifecycle().start("tbox", {});
    CHECK(world.lima_yaml("tbox")["networks"] == nlohmann::json::array());
}

TEST_CASE("refused: a VM type other than vz", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] { world.lima_config("default.yaml", {{"vmType", "qemu"}}); });
    CHECK(msg.find("the instance uses the VM type \"qemu\"; agentctl only confines vz instances") != std::string::npos);
}

TEST_CASE("refused: override.yaml moves the SSH port", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] { world.lima_config("override.yaml", {{"ssh", {{"localPort", 60022}}}}); });
    CHECK(msg.find("Lima would forward SSH on port 60022, not on the port agentctl pinned") != std::string::npos);
}

TEST_CASE("refused: override.yaml points the guest at another proxy", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] {
        world.lima_config("override.yaml", {{"env", {{"https_proxy", "http://proxy.corp:3128"}}}});
    });
    CHECK(msg.find("Lima would set https_proxy=http://proxy.corp:3128 in the guest") != std::string::npos);
}

TEST_CASE("refused: registered with limactl autostart (launchd)", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] {
        core::write_file_atomic(world.home() / "Library/LaunchAgents/io.lima-vm.autostart.tbox.plist", "<plist/>");
    });
    CHECK(msg.find("it is registered to start with launchd (limactl autostart): " + world.home().string() +
                   "/Library/LaunchAgents/io.lima-vm.autostart.tbox.plist") != std::string::npos);
    CHECK(msg.find("limactl autostart disable tbox") != std::string::npos);
}

TEST_CASE("refused: a running instance agentctl did not start", "[lima][fake][refusal]") {
    LimaWorld world;
    auto msg = refused_start(world, [&] { REQUIRE(world.run({"limactl", "start", "--tty=false", "tbox"}).ok()); });
    CHECK(msg.find("it is already running, but not under agentctl (hostagent pid ") != std::string::npos);
    // and status says so instead of claiming confinement
    auto provider = world.provider();
    CHECK(to_string(provider->lifecycle().status("tbox").confinement)
              .rfind("none: the running hostagent was not started by agentctl", 0) == 0);
}

TEST_CASE("refused: network.dns.disabled but override.yaml switches the host resolver back on",
          "[lima][fake][refusal]") {
    LimaWorld world;
    auto provider = world.provider();
    auto spec = tbox_spec(world);
    spec.network.dns.disabled = true;
    provider->lifecycle().create(spec);
    world.lima_config("override.yaml", {{"hostResolver", {{"enabled", true}}}});
    CHECK_THROWS_WITH(provider->lifecycle().start("tbox", {}), Catch::Contains("(hostResolver.enabled)"));
    // without the override: boots, and its profile denies the resolver's socket
    fs::remove(world.lima_home() / "_config" / "override.yaml");
    provider->lifecycle().start("tbox", {});
    CHECK(world.last_profile().find("(deny network-outbound (remote unix-socket (path-literal "
                                    "\"/private/var/run/mDNSResponder\")))") != std::string::npos);
}
