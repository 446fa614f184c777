// `policy check` through the binary: create's policy flags, rule origins,
// the exit code for an allowed name that does not resolve, IPv6 in brackets,
// and allow files (byte-order mark, every bad line at once).
#include <catch2/catch.hpp>

#include "cli_runner.hpp"

using agentctl::test::CliSandbox;

TEST_CASE("policy check takes create's policy flags and names where each rule came from") {
    CliSandbox cli;
    cli.write(cli.home() / "hosts.txt", "\xEF\xBB\xBF# internal hosts\nbuild_01.corp.invalid:22\n");
    auto r = cli.run({"policy", "check", "--allow-file", "hosts.txt", "--agent", "claude", "--allow-preset", "apt",
                      "build_01.corp.invalid:22"});
    INFO(r.out << r.err);
    // .invalid never resolves (RFC 6761): allowed by the policy, but not reachable now.
    CHECK(r.exit_code == 5);
    CHECK(r.out.find("Verdict:     allowed by the policy, but the name does not resolve now (no-address)\n") !=
          std::string::npos);
    CHECK(r.out.find("Named by:    build_01.corp.invalid:22 (from allow file " + (cli.home() / "hosts.txt").string() +
                     ":2)\n") != std::string::npos);
    CHECK(r.out.find("Enforced by: no provider chosen") != std::string::npos);

    auto agent = cli.run({"--provider", "incus", "policy", "check", "--agent", "claude", "api.anthropic.com:80"});
    CHECK(agent.exit_code == 4);
    CHECK(agent.out.find("(from agent claude)") != std::string::npos);
    CHECK(agent.out.find("Enforced by: incus: agentctl's egress proxy on the sandbox's own bridge") !=
          std::string::npos);

    auto off = cli.run({"policy", "check", "--no-network-policy", "--allow-lan", "10.0.0.5:22"});
    CHECK(off.exit_code == 0);
    CHECK(off.out.find("policy-disabled") != std::string::npos);

    auto v6 = cli.run({"policy", "check", "--allow", "[2606:4700::1111]:443", "[2606:4700::1111]:443"});
    CHECK(v6.exit_code == 0);
    CHECK(v6.out.find("Destination: [2606:4700::1111]:443\n") == 0);

    auto both = cli.run({"policy", "check", "--agent", "claude", "tbox", "example.com"});
    CHECK(both.exit_code == 1);
    CHECK(both.err.find("give either a sandbox NAME or policy flags") != std::string::npos);
}

TEST_CASE("an allow file with several bad lines names every one of them") {
    CliSandbox cli;
    cli.write(cli.home() / "hosts.txt", "ok.example:443\nbad host\nexample.com:0\n");
    auto r = cli.run({"policy", "check", "--allow-file", "hosts.txt", "ok.example"});
    CHECK(r.exit_code == 1);
    const auto file = (cli.home() / "hosts.txt").string();
    CHECK(r.err == "agentctl: " + file + " has 2 invalid lines:\n  " + file +
                       ":2: invalid allow entry \"bad host\": it contains a space or a control character\n  " + file +
                       ":3: invalid allow entry \"example.com:0\": port 0 is outside 1-65535\n"
                       "hint: give one entry per --allow (or per line)\n");
}
