// Credential brokering on the lima provider, end to end on Linux: the real
// provider, the real egress proxy (the built agentctl) and the contract fake
// of limactl, whose guest root filesystem for agentctl's secrets script is a
// directory of its own (tests/fakes/limactl).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "core/files.hpp"
#include "fakes/lima_fixture.hpp"
#include "policy/secret_store.hpp"
#include "provider/common/sandbox_secrets.hpp"
#include "provider/lima/proxy_process.hpp"

using namespace agentctl;
using lima_test::LimaWorld;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_name = "sec-box";
constexpr const char* k_value = "ghp_the-real-value-0123456789";

SandboxSpec secret_spec() {
    SandboxSpec spec;
    spec.name = k_name;
    spec.image = "template://ubuntu-lts";
    spec.network.allow = {policy::parse_allow_entry("example.com:443", "--allow")};
    spec.secrets = {{"github", "GH_TOKEN", {{"api.github.com", "authorization"}}, "--secret github"}};
    return spec;
}

void store_secret(const LimaWorld& world, const std::string& value) {
    policy::save_secret(world.state_dir(), {"github", policy::SecretSource::Value, value, "", {}});
}

// The lima provider of `world`, with the sandbox created (so running) from the stored secret.
std::unique_ptr<Provider> created(LimaWorld& world) {
    store_secret(world, k_value);
    auto provider = world.provider();
    provider->lifecycle().create(secret_spec());
    return provider;
}

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file below `root` that holds `needle`, except the secret store itself.
std::vector<std::string> files_holding(const fs::path& root, const std::string& needle, const fs::path& store) {
    std::vector<std::string> found;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) break;
        if (!it->is_regular_file(ec)) continue;
        if (!store.empty() && it->path().string().rfind(store.string(), 0) == 0) continue;
        if (slurp(it->path()).find(needle) != std::string::npos) found.push_back(it->path().string());
    }
    return found;
}

std::string cmdline(int pid) {
    auto text = slurp("/proc/" + std::to_string(pid) + "/cmdline");
    for (auto& c : text)
        if (c == '\0') c = ' ';
    return text;
}

// Processes whose command line names `path` (a proxy the world started).
std::vector<int> processes_naming(const std::string& path) {
    std::vector<int> pids;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc", ec)) {
        const auto name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        const int pid = std::stoi(name);
        if (pid != ::getpid() && cmdline(pid).find(path) != std::string::npos) pids.push_back(pid);
    }
    return pids;
}

std::string status_text(const InstanceInfo& info) {
    std::string text;
    for (const auto& [key, value] : info.extra) text += key + ": " + value + "\n";
    return text;
}

}  // namespace

TEST_CASE("create --secret on Lima: the guest gets the CA and only placeholders, the proxy the binding",
          "[lima][fake][secrets]") {
    LimaWorld world;
    auto provider = created(world);

    // create booted the sandbox (confined) and installed what the guest needs
    CHECK(provider->lifecycle().status(k_name).status == "Running");
    CHECK(world.state(k_name)["secretsInstalled"] == true);
    const auto dir = provider::lima::instance_state_dir(world.state_dir(), k_name);
    const auto records = provider::common::read_sandbox_secrets(dir);
    REQUIRE(records.size() == 1);
    const auto placeholder = records[0].placeholder;
    CHECK(placeholder.rfind("agentctl-secret-github-", 0) == 0);

    // the guest: the sandbox CA's certificate (never its key) in the trust store, the placeholder in every session
    const auto root = world.lima_home() / k_name / "fake-guest-root";
    const auto ca_cert = core::read_file(dir / "egress-ca.crt");
    CHECK(ca_cert.find("BEGIN CERTIFICATE") != std::string::npos);
    CHECK(slurp(root / "usr/local/share/ca-certificates/agentctl-sandbox.crt") == ca_cert);
    CHECK(slurp(root / "etc/ssl/certs/ca-certificates.crt").find(ca_cert) != std::string::npos);
    const auto environment = slurp(root / "etc/environment");
    CHECK(environment.find("GH_TOKEN=" + placeholder + "\n") != std::string::npos);
    CHECK(environment.find("NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/agentctl-sandbox.crt\n") !=
          std::string::npos);
    CHECK(
        slurp(root / "etc/profile.d/agentctl-secrets.sh").find("export GH_TOKEN=" + shell_quote(placeholder) + "\n") !=
        std::string::npos);
    CHECK(files_holding(root, "PRIVATE KEY", {}).empty());
    // ... through limactl shell, as root, after the confinement check
    bool installed_as_root = false;
    for (const auto& call : world.calls()) {
        const auto& argv = call["argv"];
        if (argv[0] == "shell" && argv.dump().find("agentctl-secrets-configured") != std::string::npos)
            installed_as_root = argv[3] == "sudo" && argv[4] == "-n" && argv[5] == "sh";
    }
    CHECK(installed_as_root);

    // the proxy was started with the binding: its secrets on stdin, their socket and owner in its arguments
    const auto pid_file = provider::lima::egress_pid_path(world.state_dir(), k_name).string();
    const int proxy = provider::lima::running_proxy_pid(pid_file);
    REQUIRE(proxy > 0);
    const auto proxy_args = cmdline(proxy);
    CHECK(proxy_args.find(" --secrets-fd 0 --secrets-socket " +
                          provider::lima::egress_secrets_socket_path(world.state_dir(), k_name).string() +
                          " --secrets-peer-uid " + std::to_string(::getuid())) != std::string::npos);
    CHECK(proxy_args.find(k_value) == std::string::npos);

    // status shows the binding, never the value
    const auto status = status_text(provider->lifecycle().status(k_name));
    CHECK(status.find("Secret github: ") != std::string::npos);
    CHECK(status.find("api.github.com") != std::string::npos);
    CHECK(status.find(k_value) == std::string::npos);

    // secret set reaches the running proxy on its socket: it holds the secret, and takes the new value live
    store_secret(world, "ghp_rotated-value-42");
    const auto reached = provider->lifecycle().refresh_secret("github");
    CHECK(reached == std::vector<std::string>{std::string(k_name) + ": rotated github"});
    CHECK(provider->lifecycle().refresh_secret("other").empty());

    // a preview prints the secret flags and the install step, no value and no CA
    provider->lifecycle().stop(k_name, {});
    world.clear_output();
    world.context().preview = true;
    provider->lifecycle().start(k_name, {});
    world.context().preview = false;
    const auto preview = world.out.str();
    CHECK(preview.find(" --secrets-fd 0 --secrets-socket ") != std::string::npos);
    CHECK(preview.find("limactl shell sec-box -- sudo -n sh -c '<the sandbox CA and the placeholders") !=
          std::string::npos);
    CHECK(preview.find("BEGIN CERTIFICATE") == std::string::npos);

    // a second start installs it again (idempotent: one block of agentctl's lines)
    provider->lifecycle().start(k_name, {});
    const auto again = slurp(root / "etc/environment");
    CHECK(again.find("# agentctl secrets begin") == again.rfind("# agentctl secrets begin"));

    // the value is nowhere but the store: not in limactl's arguments, environment or stdin, the guest,
    // the proxy's files, the state
    const auto store = policy::secrets_dir(world.state_dir());
    CHECK(files_holding(world.home(), k_value, store).empty());
    CHECK(files_holding(world.home(), "ghp_rotated-value-42", store).empty());
    CHECK(slurp(root / ".stdin").empty());

    // delete removes the record and the CA with the rest
    provider->lifecycle().remove(k_name, true);
    CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("a Lima create whose CA step fails removes everything it made", "[lima][fake][secrets]") {
    LimaWorld world;
    store_secret(world, k_value);
    lima_test::ScopedEnv lacks("FAKE_LIMA_GUEST_LACKS", "grep");
    auto provider = world.provider();
    CHECK_THROWS_WITH(provider->lifecycle().create(secret_spec()),
                      Catch::Contains("installing the sandbox CA in \"sec-box\" failed (exit code 1)") &&
                          Catch::Contains("the sandbox CA is not in"));
    CHECK(world.reporter.text().find("notice: removed what was made for sec-box") != std::string::npos);
    CHECK_FALSE(fs::exists(world.lima_home() / k_name));
    CHECK_FALSE(fs::exists(provider::lima::instance_state_dir(world.state_dir(), k_name)));
    CHECK(world.verbs().back() == "delete");
    // no proxy of it is left running
    CHECK(processes_naming(provider::lima::instance_state_dir(world.state_dir(), k_name).string()).empty());
}

TEST_CASE("a Lima start whose CA step fails stops the instance and its proxy and keeps the sandbox",
          "[lima][fake][secrets]") {
    LimaWorld world;
    auto provider = created(world);
    provider->lifecycle().stop(k_name, {});
    lima_test::ScopedEnv lacks("FAKE_LIMA_GUEST_LACKS", "grep");
    CHECK_THROWS_WITH(provider->lifecycle().start(k_name, {}),
                      Catch::Contains("installing the sandbox CA in \"sec-box\" failed") &&
                          Catch::Contains("the instance was stopped"));
    CHECK(provider->lifecycle().status(k_name).status == "Stopped");
    CHECK(provider::lima::running_proxy_pid(provider::lima::egress_pid_path(world.state_dir(), k_name).string()) == 0);
    CHECK(fs::exists(provider::lima::instance_state_dir(world.state_dir(), k_name) / "secrets.json"));
}

TEST_CASE("a Lima sandbox whose secret is gone does not start", "[lima][fake][secrets]") {
    LimaWorld world;
    auto provider = created(world);
    provider->lifecycle().stop(k_name, {});
    policy::remove_secret(world.state_dir(), "github");
    const auto calls = world.calls().size();
    CHECK_THROWS_WITH(provider->lifecycle().start(k_name, {}),
                      Catch::Contains("uses secret github, which is no longer stored"));
    // refused before the proxy or the instance started
    CHECK(provider::lima::running_proxy_pid(provider::lima::egress_pid_path(world.state_dir(), k_name).string()) == 0);
    for (auto i = calls; i < world.calls().size(); ++i) CHECK(world.calls()[i]["argv"][0] != "start");
}

TEST_CASE("network.credentials is Supported on Lima where its egress is confined", "[lima]") {
    lima_test::FakePlatform mac;
    CHECK(provider::lima::capabilities(mac).get("network.credentials").status == CapabilityStatus::Supported);
    lima_test::FakePlatform linux_host;
    linux_host.macos = false;
    CHECK(provider::lima::capabilities(linux_host).get("network.credentials").status == CapabilityStatus::NotAvailable);
}
