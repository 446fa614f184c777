// The capability gate, per provider and outcome: it runs before anything else
// and maps each status to its exit code.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;

namespace {
bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("UnderDevelopment stops with exit 2 and names feature, provider, reason and next step") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "hyperv", "create", "tbox"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(starts_with(r.err, "agentctl: create is under development on the hyperv provider: "));
    CHECK(contains(r.err, "\nhint: run `agentctl capabilities --provider hyperv` to see what it supports\n"));

    r = cli.run({"--provider", "incus", "logs", "tbox", "--exec"});
    CHECK(r.exit_code == 2);
    CHECK(starts_with(r.err, "agentctl: logs.exec is under development on the incus provider: "));

    r = cli.run({"--provider", "lima", "view", "tbox"});
    CHECK(r.exit_code == 2);
    CHECK(starts_with(r.err, "agentctl: view is under development on the lima provider: "));
}

TEST_CASE("NotAvailable stops with exit 2") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "lima", "snapshot", "create", "tbox", "before"});
    CHECK(r.exit_code == 2);
    CHECK(starts_with(r.err, "agentctl: snapshot.create is not available on the lima provider: "));

    r = cli.run({"--provider", "lima", "image", "pull", "ubuntu"});
    CHECK(r.exit_code == 2);
    CHECK(starts_with(r.err, "agentctl: image.pull is not available on the lima provider: "));

    // Lima has no cluster members to place a sandbox on.
    r = cli.run({"--provider", "lima", "create", "tbox", "--mount-none", "--no-network-policy", "--target", "node2"});
    CHECK(r.exit_code == 2);
    CHECK(starts_with(r.err, "agentctl: placement.target is not available on the lima provider: "));
}

TEST_CASE("on a Linux host the Lima provider cannot enforce a network policy, so create is refused") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "lima", "create", "tbox", "--mount-none"});
    CHECK(r.exit_code == 2);
    CHECK(starts_with(r.err, "agentctl: network.acl is not available on the lima provider: "));
}

TEST_CASE("ManualWorkaround prints the plan and exits 3 unless --force-partial") {
    CliSandbox cli;
    const std::vector<std::string> args = {"--provider",   "hyperv", "--preview", "create",  "tbox",
                                           "--mount-none", "--port", "8080:80",   "--image", "C:\\vm\\base.vhdx"};
    auto r = cli.run(args);
    CHECK(r.exit_code == 3);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "agentctl: network.port-publish on the hyperv provider needs manual steps: "));
    CHECK(contains(r.err, "netsh interface portproxy add v4tov4"));
    CHECK(contains(r.err, "\nhint: do those steps yourself, then re-run with --force-partial\n"));

    auto forced = args;
    forced.insert(forced.begin(), "--force-partial");
    r = cli.run(forced);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.err, "WARNING: network.port-publish on the hyperv provider needs manual steps: "));
    CHECK(contains(r.out, "powershell.exe"));
}

TEST_CASE("a preview lets an UnderDevelopment feature show its plan, with a warning, and runs nothing") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "hyperv", "--preview", "stop", "tbox"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.err, "WARNING: stop is under development on the hyperv provider: "));
    CHECK(contains(r.err, "(preview only)"));
    CHECK(contains(r.out, "Stop-VM"));
}

TEST_CASE("capabilities prints the matrix for every provider, as a table and as JSON") {
    CliSandbox cli;
    auto r = cli.run({"capabilities"});
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.out, "incus — "));
    CHECK(contains(r.out, "lima — "));
    CHECK(contains(r.out, "hyperv — "));
    CHECK(contains(r.out, "FEATURE               STATUS"));

    r = cli.run({"capabilities", "--output", "json"});
    REQUIRE(r.exit_code == 0);
    auto doc = nlohmann::json::parse(r.out);
    for (const char* provider : {"incus", "lima", "hyperv"}) {
        INFO(provider);
        REQUIRE(doc.contains(provider));
        CHECK(doc[provider]["features"].size() == 27);
        for (const auto& [feature, entry] : doc[provider]["features"].items()) {
            INFO(feature);
            const auto status = entry["status"].get<std::string>();
            CHECK((status == "Supported" || status == "NotAvailable" || status == "UnderDevelopment" ||
                   status == "ManualWorkaround"));
            if (status != "Supported") CHECK(!entry["message"].get<std::string>().empty());
        }
    }
    // The seeded matrix, spot-checked: what the reference promises per provider.
    CHECK(doc["incus"]["features"]["create"]["status"] == "Supported");
    CHECK(doc["incus"]["features"]["network.acl"]["status"] == "Supported");
    CHECK(doc["incus"]["features"]["logs.exec"]["status"] == "UnderDevelopment");
    CHECK(doc["lima"]["features"]["snapshot.create"]["status"] == "NotAvailable");
    CHECK(doc["lima"]["features"]["image.pull"]["status"] == "NotAvailable");
    CHECK(doc["lima"]["features"]["view"]["status"] == "UnderDevelopment");
    CHECK(doc["lima"]["features"]["network.acl"]["status"] == "NotAvailable");  // this is a Linux host
    CHECK(doc["lima"]["features"]["exec"]["status"] == "Supported");
    CHECK(doc["hyperv"]["features"]["create"]["status"] == "UnderDevelopment");
    CHECK(doc["hyperv"]["features"]["network.port-publish"]["status"] == "ManualWorkaround");
    CHECK(doc["hyperv"]["features"]["fs.mount"]["status"] == "ManualWorkaround");

    r = cli.run({"capabilities", "--provider", "lima", "--output", "json"});
    REQUIRE(r.exit_code == 0);
    doc = nlohmann::json::parse(r.out);
    CHECK(doc.size() == 1);
    CHECK(doc.contains("lima"));
}

TEST_CASE("a refused command changes nothing on disk") {
    CliSandbox cli;
    auto r = cli.run({"--provider", "lima", "create", "tbox"});
    CHECK(r.exit_code == 2);
    CHECK(!std::filesystem::exists(cli.home() / "agentctl"));
    CHECK(!std::filesystem::exists(cli.home() / ".config/agentctl/lima/tbox"));
}
