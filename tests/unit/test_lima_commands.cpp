// limactl command lines and yq expressions (pure builders).
#include <catch2/catch.hpp>

#include "agentctl/process.hpp"
#include "provider/lima/limactl_commands.hpp"

using namespace agentctl;
using namespace agentctl::provider::lima;

namespace {

SandboxSpec spec() {
    SandboxSpec s;
    s.name = "tbox";
    s.image = "template://ubuntu-lts";
    s.resources = {2, 4ull << 30, 20ull << 30};
    s.mounts = {{"/Users/dev/agentctl/workspaces/tbox", "/workspace", true, "profile default"},
                {"/Users/dev/src", "/src", false, "--mount"}};
    s.ports = {{"127.0.0.1", 8080, 80, "tcp"}};
    return s;
}

}  // namespace

TEST_CASE("create sets one expression per field, then the forced fields", "[lima]") {
    ConfinementSettings settings{50022, 51234, false};
    auto exprs = create_expressions(spec(), settings);
    std::vector<std::string> expected = {
        ".cpus = 2",
        ".memory = \"4GiB\"",
        ".disk = \"20GiB\"",
        ".mounts = [] | .mounts += "
        "[{\"location\":\"/Users/dev/agentctl/workspaces/tbox\",\"mountPoint\":\"/workspace\","
        "\"writable\":true}, {\"location\":\"/Users/dev/src\",\"mountPoint\":\"/src\",\"writable\":false}]",
        ".portForwards += [{\"guestPort\":80,\"hostPort\":8080,\"hostIP\":\"127.0.0.1\",\"proto\":\"tcp\"}]",
        ".user.name = \"agent\"",
        ".user.passwordlessSudo = true",
        ".ssh.forwardAgent = false",
        ".ssh.forwardX11 = false",
        ".copyToHost = []",
        ".networks = []",
        ".ssh.localPort = 50022",
        ".propagateProxyEnv = false",
        ".env.HTTPS_PROXY = \"http://192.168.5.2:51234\"",
        ".env.HTTP_PROXY = \"http://192.168.5.2:51234\"",
        ".env.NO_PROXY = \"localhost,127.0.0.1,::1\"",
        ".env.http_proxy = \"http://192.168.5.2:51234\"",
        ".env.https_proxy = \"http://192.168.5.2:51234\"",
        ".env.no_proxy = \"localhost,127.0.0.1,::1\"",
    };
    CHECK(exprs == expected);
    auto argv = limactl_create("tbox", "template://ubuntu-lts", exprs);
    CHECK(argv[0] == "limactl");
    CHECK(argv[1] == "create");
    CHECK(argv[2] == "--name=tbox");
    CHECK(argv[3] == "--tty=false");
    CHECK(argv[4] == "--set");
    CHECK(argv.back() == "template://ubuntu-lts");
    CHECK(argv.size() == 4 + 2 * exprs.size() + 1);
}

TEST_CASE("no mounts still resets the template's mounts, macOS guests keep their sudo", "[lima]") {
    SandboxSpec s;
    s.name = "mac";
    s.image = "template://macos-26";
    auto exprs = create_expressions(s, {50022, 0, false});
    CHECK(std::find(exprs.begin(), exprs.end(), ".mounts = []") != exprs.end());
    CHECK(std::find(exprs.begin(), exprs.end(), ".user.passwordlessSudo = true") == exprs.end());
    // unrestricted (proxy port 0): no proxy environment at all
    for (const auto& e : exprs) CHECK(e.find("proxy") == std::string::npos);
    CHECK(is_macos_guest_image("template:macos"));
    CHECK_FALSE(is_macos_guest_image("template://ubuntu-lts"));
}

TEST_CASE("start re-applies networks, SSH port, proxy environment, and resolver when DNS is off", "[lima]") {
    auto expr = start_expression({50022, 51234, true}, nullptr);
    CHECK(expr.rfind(".networks = [] | .ssh.localPort = 50022 | .propagateProxyEnv = false | ", 0) == 0);
    CHECK(expr.find(".hostResolver.enabled = false") != std::string::npos);
    CHECK(expr.find(".mounts") == std::string::npos);
    std::vector<Mount> none;
    CHECK(start_expression({50022, 51234, false}, &none).find(" | .mounts = []") != std::string::npos);
    CHECK(limactl_edit("tbox", expr) ==
          std::vector<std::string>{"limactl", "edit", "tbox", "--tty=false", "--set", expr});
}

TEST_CASE("exec and shell run as the default user, --root adds sudo -n / sudo -i", "[lima]") {
    CHECK(exec_command("tbox", {"whoami"}, false) ==
          std::vector<std::string>{"limactl", "shell", "tbox", "--", "whoami"});
    CHECK(exec_command("tbox", {"whoami"}, true) ==
          std::vector<std::string>{"limactl", "shell", "tbox", "--", "sudo", "-n", "whoami"});
    CHECK(exec_command("tbox", {"pwd"}, false, "/workspace") ==
          std::vector<std::string>{"limactl", "shell", "--workdir", "/workspace", "tbox", "--", "pwd"});
    CHECK(shell_command("tbox", false) == std::vector<std::string>{"limactl", "shell", "tbox"});
    CHECK(shell_command("tbox", true) == std::vector<std::string>{"limactl", "shell", "tbox", "--", "sudo", "-i"});
    CHECK(limactl_stop("tbox", true) == std::vector<std::string>{"limactl", "stop", "--force", "tbox"});
    CHECK(limactl_delete("tbox") == std::vector<std::string>{"limactl", "delete", "--force", "tbox"});
    CHECK(limactl_list("tbox") == std::vector<std::string>{"limactl", "list", "tbox", "--json"});
    CHECK(shell_join(sandboxed("/usr/bin/sandbox-exec", "(version 1)", limactl_start("tbox"))) ==
          "/usr/bin/sandbox-exec -p '(version 1)' limactl start --tty=false tbox");
}

TEST_CASE("sizes are written in Lima's units", "[lima]") {
    CHECK(lima_size(4ull << 30) == "4GiB");
    CHECK(lima_size(512ull << 20) == "512MiB");
    CHECK(lima_size(2ull << 40) == "2TiB");
    CHECK(lima_size(1000) == "1000");
    CHECK(yq_string("a\"b") == "\"a\\\"b\"");
}
