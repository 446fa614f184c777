// The capability matrix is built over the parts a provider implements
// (provider.hpp): what it has code for starts Supported, the rest NotAvailable,
// and nothing without code can be declared Supported.
#include <catch2/catch.hpp>

#include <map>
#include <stdexcept>
#include <string>

#include "agentctl/provider.hpp"

using namespace agentctl;

namespace {

// Which part lists each feature.
std::map<std::string, int> owners() {
    std::map<std::string, int> count;
    auto add = [&](std::span<const Feature> features) {
        for (auto feature : features) ++count[std::string(feature.name())];
    };
    add(Lifecycle::k_features);
    add(Commands::k_features);
    add(Console::k_features);
    add(EgressLog::k_features);
    add(Snapshots::k_features);
    add(Images::k_features);
    add(EgressPolicy::k_features);
    add(Collector::k_features);
    add(WarmPool::k_features);
    return count;
}

}  // namespace

TEST_CASE("every feature but logs.exec belongs to exactly one part", "[capability]") {
    const auto count = owners();
    for (auto feature : k_features) {
        INFO(feature);
        const auto it = count.find(std::string(feature.name()));
        if (feature == Feature("logs.exec")) {
            CHECK(it == count.end());
        } else {
            REQUIRE(it != count.end());
            CHECK(it->second == 1);
        }
    }
}

TEST_CASE("a matrix starts Supported where the provider has code and NotAvailable elsewhere", "[capability]") {
    CapabilityMatrix matrix({Lifecycle::k_features, Commands::k_features});
    CHECK(matrix.get("create").status == CapabilityStatus::Supported);
    CHECK(matrix.get("shell").status == CapabilityStatus::Supported);
    CHECK(matrix.implemented("exec"));
    CHECK(!matrix.implemented("snapshot.create"));
    const auto snapshot = matrix.get("snapshot.create");
    CHECK(snapshot.status == CapabilityStatus::NotAvailable);
    CHECK(!snapshot.message.empty());
    CHECK(matrix.entries().size() == k_features.size());
}

TEST_CASE("nothing without code can be Supported or a manual workaround", "[capability]") {
    CapabilityMatrix matrix({Lifecycle::k_features});
    CHECK_THROWS_AS(matrix.set("view", CapabilityStatus::Supported), std::logic_error);
    CHECK_THROWS_AS(matrix.set("view", CapabilityStatus::ManualWorkaround, "do it by hand"), std::logic_error);
    matrix.set("view", CapabilityStatus::UnderDevelopment, "planned");
    CHECK(matrix.get("view").status == CapabilityStatus::UnderDevelopment);
    // What has code may still be refused (a platform, work in progress).
    matrix.set("fs.mount", CapabilityStatus::NotAvailable, "not on this host");
    CHECK(matrix.get("fs.mount").status == CapabilityStatus::NotAvailable);
    CHECK(matrix.implemented("fs.mount"));
}

TEST_CASE("a refusal names feature, provider and reason, with the gate's hint and exit code", "[capability]") {
    auto error = refusal("lima", "view", {CapabilityStatus::UnderDevelopment, "planned"});
    CHECK(std::string(error.what()) == "view is under development on the lima provider: planned");
    CHECK(error.hint() == "run `agentctl capabilities --provider lima` to see what it supports");
    CHECK(error.code() == exit_code::k_not_available);

    error = refusal("lima", "image.pull", {CapabilityStatus::NotAvailable, "no store"});
    CHECK(std::string(error.what()) == "image.pull is not available on the lima provider: no store");
    CHECK(error.code() == exit_code::k_not_available);

    error = refusal("hyperv", "fs.mount", {CapabilityStatus::ManualWorkaround, "share it over SMB"});
    CHECK(std::string(error.what()) == "fs.mount on the hyperv provider needs manual steps: share it over SMB");
    CHECK(error.hint() == "do those steps yourself, then re-run with --force-partial");
    CHECK(error.code() == exit_code::k_manual_workaround);

    CHECK_THROWS_AS(refusal("incus", "create", {}), std::logic_error);
}
