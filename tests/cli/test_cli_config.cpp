// config set/get: round trip, every bad input, atomicity, the organisation's locks.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;

namespace {
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string slurp(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}
}  // namespace

TEST_CASE("config set then get round-trips, and the file is written") {
    CliSandbox cli;
    auto r = cli.run({"config", "set", "provider=incus"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.empty());
    r = cli.run({"config", "get", "provider"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "incus\n");
    CHECK(slurp(cli.config_file()) == "provider: \"incus\"\n");

    r = cli.run({"config", "set", "defaultProfile=strict"});
    REQUIRE(r.exit_code == 0);
    CHECK(slurp(cli.config_file()) == "defaultProfile: \"strict\"\nprovider: \"incus\"\n");
}

TEST_CASE("config get lists every key with its source, as a table and as JSON") {
    CliSandbox cli;
    REQUIRE(cli.run({"config", "set", "provider=lima"}).exit_code == 0);
    auto r = cli.run({"config", "get"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("KEY") == 0);
    // Each row: key, value, source, separated by column padding.
    auto row = [&](const std::string& key) {
        std::istringstream lines(r.out);
        std::string line;
        while (std::getline(lines, line)) {
            std::istringstream words(line);
            std::vector<std::string> cells;
            for (std::string w; words >> w;) cells.push_back(w);
            if (!cells.empty() && cells[0] == key) return cells;
        }
        return std::vector<std::string>{};
    };
    CHECK(row("provider") ==
          std::vector<std::string>{"provider", "lima", "user", "(" + cli.config_file().string() + ")"});
    CHECK(row("defaultProfile") == std::vector<std::string>{"defaultProfile", "default", "default"});
    CHECK(row("baseProfile") == std::vector<std::string>{"baseProfile", "-", "unset"});

    r = cli.run({"config", "get", "--output", "json"});
    REQUIRE(r.exit_code == 0);
    auto doc = nlohmann::json::parse(r.out);
    CHECK(doc["provider"]["value"] == "lima");
    CHECK(doc["provider"]["source"].get<std::string>().rfind("user (", 0) == 0);
    CHECK(doc["profileDir"]["value"] == "/etc/agentctl/profiles");
    CHECK(doc["baseProfile"]["value"].is_null());
}

TEST_CASE("bad config input is refused with a clear error and the file is unchanged") {
    CliSandbox cli;
    REQUIRE(cli.run({"config", "set", "provider=incus"}).exit_code == 0);
    const auto before = slurp(cli.config_file());

    auto r = cli.run({"config", "set", "provider=docker"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: invalid value for provider: provider must be one of incus, lima, hyperv (got 'docker')\n");

    r = cli.run({"config", "set", "colour=blue"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: unknown configuration key 'colour'\nhint: known keys: provider, profileDir, defaultProfile, "
          "baseProfile, incus.subnetPool, incus.subnetPrefix, incus.storagePool, incus.image, "
          "incus.proxyResolveFile, incus.proxyUpstreamCA, incus.remote, incus.project, incus.proxyPlacement, "
          "incus.imageRemote, incus.proxyMaxTunnels, incus.hostMemory, incus.hostSocketMemory, incus.hostProcesses, "
          "incus.pool.size\n");

    r = cli.run({"config", "set", "provider"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: expected KEY=VALUE, got 'provider'\nhint: for example: agentctl config set provider=incus\n");

    r = cli.run({"config", "set", "profileDir=relative/dir"});
    CHECK(r.exit_code == 1);
    CHECK(r.err == "agentctl: invalid value for profileDir: must be an absolute path (got 'relative/dir')\n");

    r = cli.run({"config", "set", "incus.subnetPool=10.0.0.0/30"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: invalid value for incus.subnetPool: must be an IPv4 CIDR with a prefix from /8 to /24 (got "
          "'10.0.0.0/30')\n");

    r = cli.run({"config", "set", "incus.subnetPrefix=30"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: invalid value for incus.subnetPrefix: must be a prefix length from 16 to 29 (got '30')\n");

    r = cli.run({"config", "set", "incus.proxyPlacement=remote"});
    CHECK(r.exit_code == 1);
    CHECK(r.err == "agentctl: invalid value for incus.proxyPlacement: must be auto, host or instance (got 'remote')\n");

    r = cli.run({"config", "set", "incus.image=two words"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: invalid value for incus.image: must be an image alias or fingerprint such as "
          "agentctl-debian-12 (got 'two words')\n");

    r = cli.run({"config", "set", "incus.imageRemote=images.example.org"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: invalid value for incus.imageRemote: must be `images` or the URL of a simplestreams server, "
          "such as https://images.linuxcontainers.org (got 'images.example.org')\n");

    r = cli.run({"config", "set", "baseProfile=strict"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("agentctl: baseProfile may only be set by the organisation, in ") == 0);

    CHECK(slurp(cli.config_file()) == before);
}

TEST_CASE("incus.imageRemote takes the URL of a simplestreams server, as image pull does") {
    CliSandbox cli;
    auto r = cli.run({"config", "set", "incus.imageRemote=https://images.example.org"});
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    r = cli.run({"config", "get", "incus.imageRemote"});
    CHECK(r.out == "https://images.example.org\n");
}

TEST_CASE("a malformed config file is reported with file, line and column") {
    CliSandbox cli;
    cli.write(cli.config_file(), "provider: incus\nbogus: 1\n");
    auto r = cli.run({"config", "get"});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "agentctl: " + cli.config_file().string() + ":2:1: unknown key 'bogus'\nhint: see `agentctl config get`\n");

    cli.write(cli.config_file(), "provider: [incus\n");
    r = cli.run({"config", "get", "provider"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("agentctl: " + cli.config_file().string() + ":") == 0);
}

TEST_CASE("the organisation's file is read first and its locked keys cannot be changed") {
    CliSandbox cli;
    cli.write(cli.org_dir() / "config.yaml", "provider: lima\nprofileDir: /srv/profiles\n");
    auto r = cli.run({"config", "get", "provider"});
    CHECK(r.out == "lima\n");
    REQUIRE(cli.run({"config", "set", "provider=incus"}).exit_code == 0);
    CHECK(cli.run({"config", "get", "provider"}).out == "incus\n");  // the user may choose the provider

    r = cli.run({"config", "set", "profileDir=/tmp/mine"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("agentctl: profileDir is set by the organisation in ") == 0);
    CHECK(cli.run({"config", "get", "profileDir"}).out == "/srv/profiles\n");
}

TEST_CASE("AGENTCTL_CONFIG points at another file") {
    CliSandbox cli;
    const auto other = cli.home() / "elsewhere.yaml";
    REQUIRE(cli.run({"config", "set", "provider=hyperv"}, {{"AGENTCTL_CONFIG", other.string()}}).exit_code == 0);
    CHECK(slurp(other) == "provider: \"hyperv\"\n");
    CHECK(!std::filesystem::exists(cli.config_file()));
}

TEST_CASE("state moves from the old config directory to the XDG state directory once, and says so") {
    CliSandbox cli;
    const auto old_state = cli.home() / ".config/agentctl/lima/tbox/state.json";
    cli.write(old_state, "{\"name\":\"tbox\"}");
    cli.write(cli.config_file(), "provider: \"hyperv\"\n");
    // Any command that reaches the provider needs the state directory.
    auto r = cli.run({"--provider", "incus", "list"});
    CHECK(contains(r.err, "agentctl: moved " + (cli.home() / ".config/agentctl/lima").string() + " to " +
                              (cli.home() / ".local/state/agentctl/lima").string()));
    CHECK_FALSE(std::filesystem::exists(old_state));
    CHECK(std::filesystem::exists(cli.home() / ".local/state/agentctl/lima/tbox/state.json"));
    // A second run finds nothing to move.
    r = cli.run({"--provider", "incus", "list"});
    CHECK_FALSE(contains(r.err, "moved"));
    CHECK(std::filesystem::exists(cli.home() / ".local/state/agentctl/lima/tbox/state.json"));

    // XDG_STATE_HOME decides where state goes; --preview moves nothing.
    CliSandbox other;
    other.write(other.home() / ".config/agentctl/lima/x/state.json", "{}");
    const auto state_home = other.root() / "xdg-state";
    r = other.run({"--preview", "--provider", "incus", "list"}, {{"XDG_STATE_HOME", state_home.string()}});
    CHECK_FALSE(std::filesystem::exists(state_home));
    r = other.run({"--provider", "incus", "list"}, {{"XDG_STATE_HOME", state_home.string()}});
    CHECK(std::filesystem::exists(state_home / "agentctl/lima/x/state.json"));
}
