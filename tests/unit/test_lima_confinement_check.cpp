// Every refusal `agentctl start` makes on Lima's effective configuration, each
// from its own fixture: one `limactl list --json` line with one thing added
// (as ~/.lima/_config/default.yaml or override.yaml would add it).
#include <catch2/catch.hpp>

#include <set>

#include "provider/lima/confinement_check.hpp"

using namespace agentctl;
using namespace agentctl::provider::lima;

namespace {

// The baseline: exactly what agentctl configured (shape of `limactl list --json`).
constexpr const char* k_clean = R"({"name":"tbox","status":"Stopped","vmType":"vz","config":{
  "vmType":"vz",
  "mounts":[{"location":"/Users/dev/agentctl/workspaces/tbox","mountPoint":"/workspace","writable":true},
            {"location":"/Users/dev/src","mountPoint":"/src","writable":false}],
  "ssh":{"localPort":50022,"forwardAgent":false,"forwardX11":false},
  "env":{"HTTPS_PROXY":"http://192.168.5.2:51234","HTTP_PROXY":"http://192.168.5.2:51234",
         "NO_PROXY":"localhost,127.0.0.1,::1","http_proxy":"http://192.168.5.2:51234",
         "https_proxy":"http://192.168.5.2:51234","no_proxy":"localhost,127.0.0.1,::1"},
  "hostResolver":{"enabled":true}}})";

ExpectedConfig expected() {
    ExpectedConfig e;
    e.mounts = {{"/Users/dev/agentctl/workspaces/tbox", "/workspace", true, ""}, {"/Users/dev/src", "/src", false, ""}};
    e.state_dir = "/Users/dev/.config/agentctl";
    e.settings = {50022, 51234, false};
    return e;
}

LimaInstance clean() { return parse_instance_json(k_clean, "/Users/dev"); }

std::set<RefusalKind> kinds(const std::vector<Refusal>& refusals) {
    std::set<RefusalKind> out;
    for (const auto& r : refusals) out.insert(r.kind);
    return out;
}

}  // namespace

TEST_CASE("the configuration agentctl made passes", "[lima]") {
    CHECK(check_effective_config(clean(), expected()).empty());
}

TEST_CASE("sharing less than the sandbox's own mounts is fine", "[lima]") {
    auto inst = clean();
    inst.config.mounts.pop_back();
    CHECK(check_effective_config(inst, expected()).empty());
}

TEST_CASE("an extra mount from Lima's _config is refused", "[lima]") {
    auto inst = clean();
    inst.config.mounts.push_back({"/Users/dev/Documents", "/Users/dev/Documents", false});
    auto r = check_effective_config(inst, expected());
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::ExtraMount);
    CHECK(r[0].message ==
          "Lima would also mount /Users/dev/Documents at /Users/dev/Documents (read-only), which is "
          "not one of this sandbox's mounts");
}

TEST_CASE("a different host directory at one of the sandbox's mount points is refused", "[lima]") {
    auto inst = clean();
    inst.config.mounts[1].location = "/Users/dev/.ssh";
    auto r = check_effective_config(inst, expected());
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::MountHostChanged);
    CHECK(r[0].message == "Lima would mount /Users/dev/.ssh at /src, where this sandbox mounts /Users/dev/src");
}

TEST_CASE("a read-only mount made writable is refused", "[lima]") {
    auto inst = clean();
    inst.config.mounts[1].writable = true;
    auto r = check_effective_config(inst, expected());
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::MountMadeWritable);
}

TEST_CASE("a writable mount over agentctl's state directory is refused", "[lima]") {
    auto e = expected();
    e.mounts.push_back({"/Users/dev", "/home-dev", true, ""});  // even one of its own
    auto inst = clean();
    inst.config.mounts.push_back({"/Users/dev", "/home-dev", true});
    auto r = check_effective_config(inst, e);
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::StateDirWritable);
    CHECK(r[0].message.find("covers agentctl's state directory /Users/dev/.config/agentctl") != std::string::npos);
    // a writable mount below it is refused too; a read-only one is only an extra mount
    inst = clean();
    inst.config.mounts.push_back({"/Users/dev/.config/agentctl/lima", "/x", true});
    CHECK(kinds(check_effective_config(inst, expected())) ==
          std::set<RefusalKind>{RefusalKind::ExtraMount, RefusalKind::StateDirWritable});
    inst = clean();
    inst.config.mounts.push_back({"/Users/dev/.config", "/cfg", false});
    CHECK(kinds(check_effective_config(inst, expected())) == std::set<RefusalKind>{RefusalKind::ExtraMount});
    // a sibling that merely shares a prefix is not covered
    inst = clean();
    e = expected();
    e.mounts.push_back({"/Users/dev/.config/agentctl-other", "/o", true, ""});
    inst.config.mounts.push_back({"/Users/dev/.config/agentctl-other", "/o", true});
    CHECK(check_effective_config(inst, e).empty());
}

TEST_CASE("SSH agent and X11 forwarding are refused, each with its own message", "[lima]") {
    auto inst = clean();
    inst.config.forward_agent = true;
    auto r = check_effective_config(inst, expected());
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::ForwardAgent);
    CHECK(r[0].message == "Lima would forward your SSH agent into the sandbox (ssh.forwardAgent: true)");
    inst = clean();
    inst.config.forward_x11 = true;
    r = check_effective_config(inst, expected());
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::ForwardX11);
}

TEST_CASE("reverse port forwards are refused, ordinary ones are fine", "[lima]") {
    auto inst = parse_instance_json(R"({"name":"tbox","vmType":"vz","config":{"vmType":"vz","ssh":{"localPort":50022},
      "env":{"HTTPS_PROXY":"http://192.168.5.2:51234","HTTP_PROXY":"http://192.168.5.2:51234",
         "NO_PROXY":"localhost,127.0.0.1,::1","http_proxy":"http://192.168.5.2:51234",
         "https_proxy":"http://192.168.5.2:51234","no_proxy":"localhost,127.0.0.1,::1"},
      "portForwards":[{"guestPort":80,"hostPort":8080},
                      {"guestSocket":"/run/docker.sock","hostSocket":"/var/run/docker.sock","reverse":true}]}})",
                                    "/Users/dev");
    auto e = expected();
    e.mounts.clear();
    auto r = check_effective_config(inst, e);
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::ReverseForward);
    CHECK(r[0].message ==
          "Lima would hand the guest a socket on your host: portForwards[1] forwards "
          "/var/run/docker.sock to /run/docker.sock in the guest (reverse: true)");
}

TEST_CASE("copyToHost entries are refused", "[lima]") {
    auto inst = clean();
    inst.config.copy_to_host.push_back({"/etc/rancher/k3s/k3s.yaml", "/Users/dev/.kube/config"});
    auto r = check_effective_config(inst, expected());
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::CopyToHost);
}

TEST_CASE("additional networks are refused", "[lima]") {
    auto inst = clean();
    inst.config.networks.push_back({"", "", true, ""});
    inst.config.networks.push_back({"shared", "", false, ""});
    auto r = check_effective_config(inst, expected());
    REQUIRE(r.size() == 2);
    CHECK(r[0].kind == RefusalKind::ExtraNetwork);
    CHECK(r[0].message.find("\"vzNAT\"") != std::string::npos);
    CHECK(r[1].message.find("\"lima: shared\"") != std::string::npos);
}

TEST_CASE("a VM type other than vz is refused", "[lima]") {
    auto inst = clean();
    inst.vm_type = "qemu";
    auto r = check_effective_config(inst, expected());
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::VmType);
    CHECK(r[0].message.find("\"qemu\"") != std::string::npos);
}

TEST_CASE("override.yaml moving the SSH port or the proxy environment is refused", "[lima]") {
    auto inst = clean();
    inst.config.ssh_local_port = 60022;
    CHECK(kinds(check_effective_config(inst, expected())) == std::set<RefusalKind>{RefusalKind::SshPortChanged});
    inst = clean();
    inst.config.env["https_proxy"] = "http://proxy.corp:3128";
    auto r = check_effective_config(inst, expected());
    REQUIRE(r.size() == 1);
    CHECK(r[0].kind == RefusalKind::ProxyEnvChanged);
    CHECK(r[0].message.find("https_proxy=http://proxy.corp:3128") != std::string::npos);
}

TEST_CASE("with network.dns.disabled, a host resolver switched back on is refused", "[lima]") {
    auto e = expected();
    e.settings.dns_disabled = true;
    CHECK(kinds(check_effective_config(clean(), e)) == std::set<RefusalKind>{RefusalKind::HostResolverOn});
    auto inst = clean();
    inst.config.host_resolver_enabled = false;
    CHECK(check_effective_config(inst, e).empty());
}

TEST_CASE("an unrestricted instance is still checked for host channels, not for network settings", "[lima]") {
    auto e = expected();
    e.confined = false;
    auto inst = clean();
    inst.vm_type = "qemu";
    inst.config.networks.push_back({"shared", "", false, ""});
    inst.config.forward_agent = true;
    CHECK(kinds(check_effective_config(inst, e)) == std::set<RefusalKind>{RefusalKind::ForwardAgent});
}

TEST_CASE("launchd registrations of limactl autostart are found", "[lima]") {
    std::set<std::string> present = {"/Users/dev/Library/LaunchAgents/io.lima-vm.autostart.tbox.plist"};
    auto exists = [&](const std::string& p) { return present.count(p) > 0; };
    CHECK(autostart_registrations("/Users/dev", "/", "tbox", exists) ==
          std::vector<std::string>{"/Users/dev/Library/LaunchAgents/io.lima-vm.autostart.tbox.plist"});
    present = {"/Library/LaunchDaemons/io.lima-vm.daemon.tbox.plist"};
    CHECK(autostart_registrations("/Users/dev", "/", "tbox", exists).size() == 1);
    CHECK(autostart_registrations("/Users/dev", "/", "other", exists).empty());
}

TEST_CASE("refusals render one per line under a heading naming the instance", "[lima]") {
    auto text = render_refusals("tbox", {{RefusalKind::ForwardX11, "a"}, {RefusalKind::CopyToHost, "b"}});
    CHECK(text == "refusing to start Lima instance \"tbox\":\n  - a\n  - b");
}
