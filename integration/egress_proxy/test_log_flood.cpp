// The decision log keeps what the sandbox did: a flood of refused requests
// goes to the refusals' own file, rate-limited and summed up, and cannot
// rotate away the connections the sandbox was allowed.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "egress_proxy/egress_proxy.hpp"
#include "egress_proxy/refusal_log.hpp"
#include "suite_support.hpp"
#include "support/build_paths.hpp"

using namespace std::chrono_literals;

TEST_CASE("a flood of 32000 refused CONNECTs with long names does not remove an earlier allowed record") {
    SUITE_REQUIRE_READY();
    suite::Network network;
    suite::ProxyFiles files;
    files.write_resolve("192.0.3.2 allowed.test\n");
    files.write_policy(suite::policy_allowing({"allowed.test:7"}));
    suite::Proxy proxy(files, {}, agentctl::test::agentctl_binary());  // the real binary, with its 10 MiB log cap
    {
        suite::Client client(proxy.port);
        REQUIRE(suite::connect_through(client, "allowed.test:7").status == 200);
    }
    // 253-character names, each a different one: unrolled into the log one by
    // one, 32,000 of them would fill it twice over (about 22 MB).
    constexpr int k_flood = 32'000;
    const std::string label(63, 'x');
    std::atomic<int> refused{0};
    const auto started = std::chrono::steady_clock::now();
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t) {
        clients.emplace_back([&, t] {
            for (int i = t; i < k_flood; i += 4) {
                auto first = std::to_string(i);
                first += std::string(63 - first.size(), 'f');
                suite::Client client(proxy.port);
                const auto name = first + "." + label + "." + label + "." + std::string(61, 'y');
                if (suite::connect_through(client, name + ":443").status == 403) ++refused;
            }
        });
    }
    for (auto& client : clients) client.join();
    const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    WARN("32000 refused CONNECTs in " << took << " s");
    REQUIRE(refused == k_flood);

    // Every refusal is accounted for: logged on its own, or counted in a
    // summary line (the last second's once the proxy's next tick writes it).
    std::vector<nlohmann::json> lines;
    auto accounted = [&] {
        lines = files.log_lines();
        long long n = 0;
        for (const auto& line : lines) {
            if (line.value("decision", "") == "deny") ++n;
            if (line.value("event", "") == "refusals-suppressed") n += line.value("suppressed", 0LL);
        }
        return n;
    };
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         accounted() < k_flood && std::chrono::steady_clock::now() < deadline;) {
        std::this_thread::sleep_for(100ms);
    }
    CHECK(accounted() == k_flood);
    bool allowed_kept = false;
    for (const auto& line : lines) {
        allowed_kept =
            allowed_kept || (line.value("decision", "") == "allow" && line.value("host", "") == "allowed.test");
    }
    CHECK(allowed_kept);
    // The decision log itself was never rotated, and the refusals' file stays small.
    namespace fs = std::filesystem;
    const auto refusals = agentctl::egress_proxy::refusal_log_path(files.log.string());
    CHECK_FALSE(fs::exists(files.log.string() + ".1"));
    CHECK_FALSE(fs::exists(refusals + ".1"));
    const auto refused_bytes = fs::file_size(refusals);
    WARN("the refusals' file holds " << refused_bytes << " bytes");
    CHECK(refused_bytes < 10 * 1024 * 1024);
    std::size_t denied_in_full = 0;
    for (const auto& line : lines) denied_in_full += line.value("decision", "") == "deny" ? 1 : 0;
    CHECK(denied_in_full <= agentctl::egress_proxy::k_refusals_per_second * (static_cast<std::size_t>(took) + 2));
}
