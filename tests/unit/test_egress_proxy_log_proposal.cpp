// `policy propose`: the network log's destinations as an allow file or a
// profile that agentctl reads back as it is.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "egress_proxy/log_proposal.hpp"
#include "policy/allow_text.hpp"
#include "policy/profile.hpp"

using namespace agentctl;
using namespace agentctl::egress_proxy;

namespace {

DestinationSummary used(const std::string& host, std::uint16_t port, std::uint64_t connections, std::uint64_t up) {
    DestinationSummary row;
    row.host = host;
    row.port = port;
    row.connections = connections;
    row.bytes_up = up;
    row.bytes_down = 2 * up;
    row.first_seen = "2026-12-04T01:00:00.000Z";
    row.last_seen = "2026-12-04T01:05:00.000Z";
    return row;
}

DestinationSummary refused(const std::string& host, std::uint16_t port, const std::string& reason, std::uint64_t n) {
    auto row = used(host, port, 0, 0);
    row.refusals = n;
    row.refusal_reasons[reason] = n;
    return row;
}

std::vector<DestinationSummary> observed() {
    return {used("api.github.com", 443, 3, 5 * 1024 * 1024),
            used("pypi.org", 443, 1, 1200),
            refused("files.pythonhosted.org", 443, "not-allowlisted", 4),
            refused("objects.githubusercontent.com", 443, "not-allowlisted", 1),
            refused("93.184.216.34", 443, "bare-ip-not-listed", 2),
            refused("x7kq9zt2m4vb8w1p.exfil.example", 443, "not-allowlisted", 9),
            refused("10.0.0.5", 22, "lan", 6),
            refused("evil.test\n*.com", 443, "not-allowlisted", 1)};
}

std::string proposal(const std::vector<DestinationSummary>& rows, ProposalForm form, bool wildcards = false) {
    std::ostringstream out;
    print_proposal(rows, ProposalOptions{"tbox", form, wildcards}, out);
    return out.str();
}

std::vector<std::string> entries(const std::vector<policy::AllowRule>& rules) {
    std::vector<std::string> out;
    for (const auto& rule : rules) out.push_back(rule.entry());
    return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the proposed allow file is read back as it is: what was used and what an allow rule would open") {
    const auto text = proposal(observed(), ProposalForm::AllowFile);
    INFO(text);
    const auto rules = policy::parse_allow_text(text, "tbox.allow");
    CHECK(entries(rules) == std::vector<std::string>{"93.184.216.34:443", "api.github.com:443",
                                                     "files.pythonhosted.org:443", "objects.githubusercontent.com:443",
                                                     "pypi.org:443", "x7kq9zt2m4vb8w1p.exfil.example:443"});
    // Counts and bytes as comments, above each entry.
    CHECK(contains(text,
                   "# api.github.com:443 used: 3 connections, 5.0 MiB up, 10.0 MiB down; seen "
                   "2026-12-04T01:00:00.000Z to 2026-12-04T01:05:00.000Z\napi.github.com:443\n"));
    CHECK(contains(text, "# files.pythonhosted.org:443 refused 4 times (not-allowlisted 4); seen "));
    // Addresses and random-looking names are flagged for a person.
    CHECK(contains(text, "# CHECK: an address, not a name: whoever holds it later is let in too\n93.184.216.34:443\n"));
    CHECK(contains(text,
                   "# CHECK: a random-looking name: a per-session host, or data carried in the name\n"
                   "x7kq9zt2m4vb8w1p.exfil.example:443\n"));
    CHECK_FALSE(contains(text, "pypi.org:443\n# CHECK"));
    // What no allow rule opens is named, not proposed; a name carrying a line break never makes a line of its own.
    CHECK(contains(text, "# not proposed: 10.0.0.5:22 refused (lan 6): an allow rule does not open it\n"));
    CHECK(contains(text, "# not proposed: evil.test?*.com:443: not a host name or address an allow rule can name\n"));
}

TEST_CASE("the proposed profile is a tighten-only profile the loader accepts as it is") {
    const auto text = proposal(observed(), ProposalForm::Profile);
    INFO(text);
    const auto profile =
        policy::parse_profile(text, "/profiles/tbox-proposed.yaml", policy::ProfileSource::File, policy::LoadContext{});
    CHECK(profile.name == "tbox-proposed");
    CHECK(profile.spec.deny_lan == true);
    CHECK(entries(profile.spec.allow) == std::vector<std::string>{"93.184.216.34:443", "api.github.com:443",
                                                                  "files.pythonhosted.org:443",
                                                                  "objects.githubusercontent.com:443", "pypi.org:443",
                                                                  "x7kq9zt2m4vb8w1p.exfil.example:443"});
}

TEST_CASE("names are grouped into a wildcard only when asked, never under a top-level domain") {
    std::vector<DestinationSummary> rows{used("a.cdn.example.com", 443, 1, 10), used("b.cdn.example.com", 443, 1, 10),
                                         used("b.cdn.example.com", 80, 1, 10), used("x.com", 443, 1, 10),
                                         used("y.com", 443, 1, 10)};
    CHECK(entries(policy::parse_allow_text(proposal(rows, ProposalForm::AllowFile), "f")) ==
          std::vector<std::string>{"a.cdn.example.com:443", "b.cdn.example.com:80", "b.cdn.example.com:443",
                                   "x.com:443", "y.com:443"});
    const auto grouped = proposal(rows, ProposalForm::AllowFile, true);
    INFO(grouped);
    CHECK(entries(policy::parse_allow_text(grouped, "f")) ==
          std::vector<std::string>{"*.cdn.example.com:443", "b.cdn.example.com:80", "x.com:443", "y.com:443"});
    CHECK(contains(grouped, "# a.cdn.example.com:443 used: 1 connection"));  // each name's counts stay
}

TEST_CASE("a random-looking label is told from an ordinary one") {
    CHECK(looks_generated("x7kq9zt2m4vb8w1p.exfil.example"));
    CHECK(looks_generated("d3b07384d113edec49eaa6238ad5ff00.example.com"));
    CHECK_FALSE(looks_generated("objects.githubusercontent.com"));
    CHECK_FALSE(looks_generated("files.pythonhosted.org"));
    CHECK_FALSE(looks_generated("registry-1.docker.io"));
    CHECK_FALSE(looks_generated("2606:4700::1111"));
}
