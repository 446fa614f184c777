// The egress proxy's command line has one format: what the providers write
// with egress_proxy::proxy_command is what the hidden verb reads.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include "cli/commands_list.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "egress_proxy/proxy_arguments.hpp"

using agentctl::egress_proxy::proxy_command;
using agentctl::egress_proxy::ProxyOptions;

namespace {

// `argv` (PROGRAM egress-proxy FLAGS...) read by the verb's own options.
ProxyOptions read_back(const std::vector<std::string>& argv) {
    CLI::App app;
    auto* verb = app.add_subcommand(std::string(agentctl::egress_proxy::k_verb));
    ProxyOptions read;
    agentctl::cli::add_egress_proxy_options(*verb, read);
    std::vector<std::string> reversed(argv.rbegin(), argv.rend() - 1);  // CLI11 takes them last first, without argv[0]
    app.parse(reversed);
    return read;
}

}  // namespace

TEST_CASE("egress-proxy: every option the providers write is read back as it was", "[egress-proxy]") {
    ProxyOptions written;
    written.listen = "10.213.0.17:3128";
    written.policy_file = "../egress-policy.json";
    written.pid_file = "egress-proxy.pid";
    written.log_file = "egress.log";
    written.resolve_file = "../egress-resolve";
    written.sandbox_name = "tbox";
    written.limits.event_loops = 3;
    written.limits.max_tunnels = 64;
    written.secrets_fd = 0;
    written.secrets_socket = "secrets.sock";
    written.secrets_peer_uid = 1000;
    written.upstream_ca_file = "../egress-upstream-ca.crt";
    written.companion = true;
    written.server_routes = "/run/agentctl/server-fib_trie";

    const auto argv = proxy_command("/usr/bin/agentctl", written);
    REQUIRE(argv.size() > 2);
    CHECK(argv[0] == "/usr/bin/agentctl");
    CHECK(argv[1] == "egress-proxy");
    const auto read = read_back(argv);
    CHECK(read.listen == written.listen);
    CHECK(read.policy_file == written.policy_file);
    CHECK(read.pid_file == written.pid_file);
    CHECK(read.log_file == written.log_file);
    CHECK(read.resolve_file == written.resolve_file);
    CHECK(read.sandbox_name == written.sandbox_name);
    CHECK(read.limits.event_loops == written.limits.event_loops);
    CHECK(read.limits.max_tunnels == written.limits.max_tunnels);
    CHECK(read.secrets_fd == written.secrets_fd);
    CHECK(read.secrets_socket == written.secrets_socket);
    CHECK(read.secrets_peer_uid == written.secrets_peer_uid);
    CHECK(read.upstream_ca_file == written.upstream_ca_file);
    CHECK(read.companion == written.companion);
    CHECK(read.server_routes == written.server_routes);
}

TEST_CASE("egress-proxy: a field left at its default is not written, and reads back as the default", "[egress-proxy]") {
    ProxyOptions written;
    written.listen = "127.0.0.1:3128";
    written.policy_file = "policy.json";
    const auto argv = proxy_command("agentctl", written);
    CHECK(argv == std::vector<std::string>{"agentctl", "egress-proxy", "--listen", "127.0.0.1:3128", "--policy",
                                           "policy.json"});
    const auto read = read_back(argv);
    const ProxyOptions defaults;
    CHECK(read.secrets_fd == defaults.secrets_fd);
    CHECK(read.secrets_peer_uid == defaults.secrets_peer_uid);
    CHECK(read.limits.max_tunnels == defaults.limits.max_tunnels);
    CHECK(read.limits.event_loops == defaults.limits.event_loops);
    CHECK_FALSE(read.companion);
}

TEST_CASE("egress-proxy: no command line turns a sandbox proxy's connection records off", "[egress-proxy]") {
    // The records can be switched off in a bench's runner only (ProxyLimits::connection_records).
    ProxyOptions on;
    on.listen = "127.0.0.1:3128";
    on.policy_file = "policy.json";
    on.limits.event_loops = 2;
    on.limits.max_tunnels = 32;
    on.companion = true;
    ProxyOptions off = on;
    off.limits.connection_records = false;
    REQUIRE(ProxyOptions().limits.connection_records);
    // What the providers write does not carry it ...
    const auto argv = proxy_command("agentctl", off);
    CHECK(argv == proxy_command("agentctl", on));
    CHECK(read_back(argv).limits.connection_records);
    // ... and the verb takes no flag for it, however it is spelt.
    for (const char* flag : {"--no-records", "--records", "--connection-records", "--no-connection-records"}) {
        INFO(flag);
        auto with_flag = argv;
        with_flag.emplace_back(flag);
        CHECK_THROWS_AS(read_back(with_flag), CLI::ParseError);
        with_flag.emplace_back("false");
        CHECK_THROWS_AS(read_back(with_flag), CLI::ParseError);
    }
}
