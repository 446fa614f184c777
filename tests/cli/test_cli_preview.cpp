// --preview changes nothing and shows what the real run would do; with
// --output json, stdout is one JSON document.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;
using agentctl::test::tree_listing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("config set and profile set under --preview show the new file and write nothing") {
    CliSandbox cli;
    const auto before = tree_listing(cli.root());
    auto r = cli.run({"--preview", "config", "set", "provider=incus"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "# " + cli.config_file().string() + " would become:\nprovider: \"incus\"\n");
    r = cli.run({"--preview", "profile", "set", "strict"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "defaultProfile: \"strict\""));
    CHECK_FALSE(contains(r.err, "default profile is now"));
    CHECK(tree_listing(cli.root()) == before);

    // The same checks as the real run.
    r = cli.run({"--preview", "config", "set", "provider=docker"});
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "provider must be one of incus, lima, hyperv"));
    r = cli.run({"--preview", "profile", "set", "no-such-profile"});
    CHECK(r.exit_code == 1);
    CHECK(tree_listing(cli.root()) == before);

    // And the real run does write.
    REQUIRE(cli.run({"config", "set", "provider=incus"}).exit_code == 0);
    CHECK(tree_listing(cli.root()) != before);
}

TEST_CASE("a preview create shows the provisioning steps and the mounts it asks for, and creates nothing") {
    CliSandbox cli;
    cli.use_incus();
    const auto shared = cli.home() / "src" / "app";
    std::filesystem::create_directories(shared);
    // A writable mount is handed to its owner; host root never is (run as root: give it to uid 1500).
    if (::geteuid() == 0) REQUIRE(::chown(shared.c_str(), 1500, 1500) == 0);
    const auto before = tree_listing(cli.root());
    auto r = cli.run({"--preview", "create", "u12-preview", "--isolation", "container", "--image", "agentctl-debian-12",
                      "--allow", "93.184.216.34:443", "--package", "git", "--agent", "codex", "--mount-only", "--mount",
                      shared.string() + ":/src:w"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    // The package install and the agent install run in the guest: both requests are shown.
    CHECK(contains(r.out, "apt-get install -y -q --no-install-recommends git"));
    CHECK(contains(r.out, "/1.0/instances/u12-preview/exec"));
    CHECK(contains(r.err, "installing packages with apt: git"));
    CHECK(contains(r.err, "installing agent codex as codex"));  // the user is named after --agent
    // The mount report describes the mount in the request.
    CHECK(contains(r.err, "host directories exposed to this sandbox:\n  " + shared.string() + " -> /src (writable)"));
    CHECK_FALSE(contains(r.err, "no host directories"));
    CHECK(tree_listing(cli.root()) == before);

    // Nothing in Incus either.
    if (agentctl::test::incus_unavailable().empty()) {
        auto list = cli.run({"list", "-q"});
        CHECK(list.exit_code == 0);
        CHECK_FALSE(contains(list.out, "u12-preview"));
    }
}

TEST_CASE("with --preview --output json, stdout is one JSON document holding the commands") {
    CliSandbox cli;
    cli.use_incus();
    auto r = cli.run({"--preview", "--output", "json", "create", "u12-json", "--isolation", "container", "--image",
                      "agentctl-debian-12", "--no-network-policy"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto doc = nlohmann::json::parse(r.out);  // throws when it is not exactly one document
    CHECK(doc["preview"] == true);
    REQUIRE(doc["commands"].is_array());
    CHECK(doc["commands"].size() > 3);
    for (const auto& line : doc["commands"]) CHECK(line.get<std::string>().rfind("incus query ", 0) == 0);

    r = cli.run({"--preview", "--format", "json", "config", "set", "provider=lima"});
    REQUIRE(r.exit_code == 0);
    doc = nlohmann::json::parse(r.out);
    CHECK(doc["commands"].empty());
    CHECK(contains(doc["result"].get<std::string>(), "provider: \"lima\""));
}

TEST_CASE("a preview start --mount resolves the mount as the real run would and creates no directory") {
    CliSandbox cli;
    cli.use_incus();
    const auto missing = cli.home() / "not-yet";
    const auto before = tree_listing(cli.root());
    // The default profile sets createMissing: the real run would make the directory.
    auto r = cli.run({"--preview", "start", "u12-nosuch", "--mount", missing.string() + ":/data"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_FALSE(contains(r.err, "internal error"));
    CHECK(contains(r.out, "-X PUT --data"));
    CHECK(contains(r.out, "\"path\":\"/data\""));
    CHECK(contains(r.out, "\"source\":\"" + missing.string() + "\""));
    CHECK(contains(r.err, missing.string() + " -> /data (read-only)"));
    CHECK_FALSE(std::filesystem::exists(missing));
    CHECK(tree_listing(cli.root()) == before);
}

TEST_CASE("a preview view prints the console command") {
    CliSandbox cli;
    cli.use_incus();
    auto r = cli.run({"--preview", "view", "u12-nosuch"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "incus console u12-nosuch --type=vga\n"));
}

TEST_CASE("a preview create shows the upload budgets, the lowest of --budget and the profiles") {
    CliSandbox cli;
    cli.use_incus();
    cli.write(cli.home() / ".config" / "agentctl" / "profiles" / "capped.yaml",
              "apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network:\n"
              "    budgets: [\"api.test:443=1MiB\"]\n    defaultBudget: 10MiB\n");
    auto r = cli.run({"--preview", "create", "u30-budget", "--isolation", "container", "--image", "agentctl-debian-12",
                      "--mount-none", "--profile", "capped", "--allow", "api.test:443", "--budget", "api.test:443=5MiB",
                      "--budget", "uploads.test:443=2KiB"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.err, "upload budget: 1048576 bytes to api.test:443\n"));  // the profile's is lower
    CHECK(contains(r.err, "upload budget: 2048 bytes to uploads.test:443\n"));
    CHECK(contains(r.err, "upload budget: 10485760 bytes to each other destination\n"));
    r = cli.run({"--preview", "create", "u30-budget", "--isolation", "container", "--image", "agentctl-debian-12",
                 "--mount-none", "--budget", "api.test:443=none"});
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "invalid budget \"api.test:443=none\": none lifts a budget of a running sandbox only"));
}
