// The built agentctl binary with `--provider lima` on this (Linux) host, with
// the contract fakes of limactl and sandbox-exec first on PATH: the capability
// gate refuses a confined sandbox here, and an unrestricted one goes through
// the whole lifecycle.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "agentctl/process.hpp"
#include "fakes/lima_fixture.hpp"
#include "support/build_paths.hpp"

using namespace agentctl;
namespace fs = std::filesystem;

namespace {

class Cli {
public:
    Cli() : m_root(fs::temp_directory_path() / ("agentctl-lima-cli-" + std::to_string(::getpid()))) {
        fs::remove_all(m_root);
        fs::create_directories(m_root / "home" / ".lima");
        m_root = fs::canonical(m_root);
    }
    ~Cli() {
        (void)run({"--provider", "lima", "delete", "tbox", "--force"});
        fs::remove_all(m_root);
    }
    Cli(const Cli&) = delete;
    Cli& operator=(const Cli&) = delete;

    ProcessResult run(std::vector<std::string> args) {
        ProcessRequest request;
        request.argv = {agentctl::test::agentctl_binary()};
        request.argv.insert(request.argv.end(), args.begin(), args.end());
        const auto home = (m_root / "home").string();
        request.env = {{"HOME", home},
                       {"LIMA_HOME", home + "/.lima"},
                       {"XDG_CONFIG_HOME", home + "/.config"},
                       {"AGENTCTL_CONFIG", home + "/.config/agentctl/config.yaml"},
                       {"PATH", lima_test::fakes_dir() + ":/usr/bin:/bin"}};
        request.cwd = home;
        request.timeout = std::chrono::minutes(2);
        return make_real_process_runner()->run(request);
    }
    [[nodiscard]] fs::path home() const { return m_root / "home"; }

private:
    fs::path m_root;
};

}  // namespace

TEST_CASE("agentctl --provider lima on Linux: a confined create is gated, exit 2", "[lima][cli]") {
    Cli cli;
    auto r = cli.run({"--provider", "lima", "create", "tbox"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("network.acl is not available on the lima provider") != std::string::npos);
    CHECK(r.err.find("incus provider") != std::string::npos);
    CHECK_FALSE(fs::exists(cli.home() / ".lima" / "tbox"));
}

TEST_CASE("agentctl --provider lima: unrestricted lifecycle through the binary", "[lima][cli]") {
    Cli cli;
    auto r = cli.run({"--provider", "lima", "create", "tbox", "--no-network-policy"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(fs::exists(cli.home() / ".lima" / "tbox" / "lima.yaml"));

    r = cli.run({"--provider", "lima", "--preview", "start", "tbox"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("limactl start --tty=false tbox\n") != std::string::npos);
    CHECK(r.out.find("sandbox-exec") == std::string::npos);

    r = cli.run({"--provider", "lima", "start", "tbox"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK((r.out + r.err).find("host directories exposed to this sandbox") != std::string::npos);

    r = cli.run({"--provider", "lima", "exec", "tbox", "--", "sh", "-c", "echo out; exit 5"});
    CHECK(r.exit_code == 5);
    CHECK(r.out == "out\n");

    r = cli.run({"--provider", "lima", "status", "tbox"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("Running") != std::string::npos);

    r = cli.run({"--provider", "lima", "--preview", "delete", "tbox"});
    CHECK(r.out == "limactl delete --force tbox\n");

    r = cli.run({"--provider", "lima", "delete", "tbox", "--force"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(fs::exists(cli.home() / ".lima" / "tbox"));
    CHECK_FALSE(fs::exists(cli.home() / ".config" / "agentctl" / "lima" / "tbox"));
}
