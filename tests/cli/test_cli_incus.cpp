// The CLI against the real Incus daemon: several names on stop/delete, list -q,
// a preview of policy add and start --mount on a real sandbox, a failing step
// shown as failed, the lock message, version and completion of sandbox names.
// Each case says why and checks nothing more when no daemon is reachable.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "support/build_paths.hpp"

using agentctl::test::CliSandbox;
using agentctl::test::incus_unavailable;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool skipped() {
    const auto why = incus_unavailable();
    if (!why.empty()) WARN("not run: " << why);
    return !why.empty();
}

// Creates a small container sandbox; the destructor deletes it.
struct RealSandbox {
    CliSandbox& cli;
    std::string name;
    RealSandbox(CliSandbox& c, std::string n) : cli(c), name(std::move(n)) {
        (void)cli.run({"delete", "-f", name});  // leftovers of an interrupted run
        auto r = cli.run({"create", name, "--isolation", "container", "--image", "agentctl-debian-12", "--allow",
                          "93.184.216.34:443"});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
    }
    ~RealSandbox() { (void)cli.run({"delete", "-f", name}); }
    RealSandbox(const RealSandbox&) = delete;
    RealSandbox& operator=(const RealSandbox&) = delete;
};

}  // namespace

TEST_CASE("incus: list -q, preview of policy add and start --mount, several names on delete", "[incus]") {
    if (skipped()) return;
    CliSandbox cli;
    cli.use_incus();
    RealSandbox sandbox(cli, "u12-a");

    auto r = cli.run({"list", "-q"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "u12-a\n"));
    CHECK_FALSE(contains(r.out, "NAME"));

    // The preview request carries the whole new allowlist: what is there plus the new entry.
    r = cli.run({"--preview", "policy", "add", "u12-a", "93.184.216.35:443"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "-X PUT --data"));
    CHECK(contains(r.out, "93.184.216.34/32"));
    CHECK(contains(r.out, "93.184.216.35/32"));
    r = cli.run({"--preview", "policy", "remove", "u12-a", "93.184.216.34:443"});
    CHECK(r.exit_code == 0);
    CHECK_FALSE(contains(r.out, "93.184.216.34/32"));
    auto status = nlohmann::json::parse(cli.run({"status", "u12-a", "--output", "json"}).out);
    REQUIRE(status["network"]["allow"].size() == 1);  // nothing changed
    CHECK(status["network"]["allow"][0]["entry"] == "93.184.216.34:443");

    // A preview start --mount starts from the sandbox's real mounts.
    const auto extra = cli.home() / "extra";
    std::filesystem::create_directories(extra);
    r = cli.run({"--preview", "start", "u12-a", "--mount", extra.string() + ":/extra"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "\"path\":\"/extra\""));
    CHECK(contains(r.out, "\"path\":\"/workspace\""));
    status = nlohmann::json::parse(cli.run({"status", "u12-a", "--output", "json"}).out);
    CHECK(status["mounts"].size() == 1);

    // Sandbox names complete from the provider's list.
    r = cli.run({"__complete", "sandboxes"});
    CHECK(contains(r.out, "u12-a\n"));

    // Several names: each is tried; the missing one is reported; the exit status says so.
    r = cli.run({"rm", "-f", "u12-a", "u12-zz"});
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "agentctl: u12-zz: "));
    CHECK_FALSE(contains(cli.run({"list", "-q"}).out, "u12-a\n"));
}

TEST_CASE("incus: a failing step is shown as failed, and the error follows on its own line", "[incus]") {
    if (skipped()) return;
    CliSandbox cli;
    cli.use_incus();
    // A fingerprint is not looked up before create (an alias is): Incus itself
    // refuses it, in the middle of the steps.
    const std::string missing(64, '0');
    const std::vector<std::string> args{"create",  "u12-fail", "--isolation", "container",
                                        "--image", missing,    "--mount-none"};
    auto r = cli.run(args);
    CHECK(r.exit_code == 1);
    const std::string step = "creating container u12-fail from image " + missing;
    // Without a terminal: one line per step, then "failed:", then the error.
    CHECK(contains(r.err, "agentctl: " + step + "...\nagentctl: failed: " + step + "\n"));
    // The cleanup that follows ends as done; the last line is the create's error.
    CHECK(contains(r.err, "agentctl: removed what was made for u12-fail\nagentctl: Incus refused "));
    CHECK_FALSE(contains(r.err, "failed: deleting"));

    // On a terminal the spinner line of the failed step ends "failed", never "ok".
    std::string command = agentctl::test::agentctl_binary();
    for (const auto& a : args) command += " " + a;
    auto runner = agentctl::make_real_process_runner();
    agentctl::ProcessRequest request;
    request.argv = {"script", "-qefc", command, "/dev/null"};
    request.env = {
        {"HOME", cli.home().string()}, {"XDG_CONFIG_HOME", (cli.home() / ".config").string()}, {"XDG_STATE_HOME", ""},
        {"XDG_RUNTIME_DIR", ""},       {"AGENTCTL_ORG_DIR", cli.org_dir().string()},           {"NO_COLOR", "1"}};
    request.timeout = std::chrono::seconds(120);
    auto t = runner->run(request);
    INFO(t.out);
    CHECK(t.exit_code == 1);
    CHECK(contains(t.out, "\rfailed " + step));
    CHECK_FALSE(contains(t.out, "ok " + step));
    CHECK(contains(t.out, "ok creating bridge"));
    CHECK_FALSE(contains(cli.run({"list", "-q"}).out, "u12-fail"));
}

TEST_CASE("incus: a failed create takes back the workspace directory it made, and only that", "[incus]") {
    if (skipped()) return;
    CliSandbox cli;
    cli.use_incus();
    const std::string missing(64, '0');  // Incus refuses it after the directories are made
    const auto workspaces = cli.home() / "agentctl" / "workspaces";
    auto r = cli.run({"create", "u12-gone", "--isolation", "container", "--image", missing});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "/agentctl/workspaces/u12-gone -> /workspace"));  // the mount was planned
    CHECK_FALSE(std::filesystem::exists(workspaces / "u12-gone"));

    // A directory that was there before is the user's: it stays, with what is in it.
    std::filesystem::create_directories(workspaces / "u12-kept");
    cli.write(workspaces / "u12-kept" / "notes.txt", "mine\n");
    r = cli.run({"create", "u12-kept", "--isolation", "container", "--image", missing});
    CHECK(r.exit_code == 1);
    CHECK(std::filesystem::exists(workspaces / "u12-kept" / "notes.txt"));

    // --keep-on-failure keeps what the create made, the directory too.
    r = cli.run({"create", "u12-gone", "--isolation", "container", "--image", missing, "--keep-on-failure"});
    CHECK(r.exit_code == 1);
    CHECK(std::filesystem::is_directory(workspaces / "u12-gone"));
    (void)cli.run({"delete", "-f", "u12-gone"});
}

TEST_CASE("incus: version names the daemon's version") {
    if (skipped()) return;
    CliSandbox cli;
    cli.use_incus();
    auto r = cli.run({"version"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "Provider: incus\n"));
    CHECK(contains(r.out, "Backend:  Incus 6."));
}

TEST_CASE("a command waiting for another agentctl's lock on the same sandbox says so") {
    CliSandbox cli;
    cli.use_incus();
    const auto locks = cli.home() / ".local" / "state" / "agentctl" / "run" / "locks";
    std::filesystem::create_directories(locks);
    auto runner = agentctl::make_real_process_runner();
    agentctl::ProcessRequest request;
    // The shell holds the lock, as another agentctl stopping u12-lock would,
    // and lets it go once the waiting stop has said so.
    const auto said = cli.home() / "stop.err";
    request.argv = {"bash",
                    "-c",
                    "exec 9>\"$1\"; flock 9; \"$2\" stop u12-lock 9>&- 2>\"$3\" & stop=$!; "
                    "for _ in $(seq 600); do grep -q 'waiting for another' \"$3\" && break; sleep 0.05; done; "
                    "exec 9>&-; wait $stop; cat \"$3\" >&2",
                    "bash",
                    (locks / "incus-u12-lock.lock").string(),
                    agentctl::test::agentctl_binary(),
                    said.string()};
    request.env = {{"HOME", cli.home().string()},
                   {"XDG_CONFIG_HOME", (cli.home() / ".config").string()},
                   {"XDG_STATE_HOME", ""},
                   {"XDG_RUNTIME_DIR", ""},
                   {"AGENTCTL_ORG_DIR", cli.org_dir().string()}};
    request.timeout = std::chrono::seconds(60);
    auto r = runner->run(request);
    CHECK(contains(r.err, "agentctl: waiting for another agentctl that is working on u12-lock (lock " +
                              (locks / "incus-u12-lock.lock").string() + ")\n"));
}
