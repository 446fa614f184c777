// The hyperv provider's capability matrix: complete, and honest about it.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "provider/hyperv/hyperv_provider.hpp"

using namespace agentctl;

namespace {

class Platform final : public HostPlatform {
public:
    explicit Platform(bool macos) : m_macos(macos) {}
    [[nodiscard]] bool is_macos() const override { return m_macos; }
    [[nodiscard]] std::string sandbox_exec_path() const override { return "/usr/bin/sandbox-exec"; }

private:
    bool m_macos;
};

CapabilityMatrix matrix() { return provider::hyperv::capabilities(Platform(false)); }

}  // namespace

TEST_CASE("every feature has an explicit status and a message", "[hyperv][capabilities]") {
    const auto m = matrix();
    std::set<std::string> known;
    for (auto feature : k_features) {
        INFO(feature);
        known.insert(std::string(feature));
        REQUIRE(m.entries().count(std::string(feature)) == 1);
        const auto capability = m.get(feature);
        CHECK(capability.status != CapabilityStatus::Supported);
        CHECK(capability.status !=
              CapabilityStatus::NotAvailable);  // nothing here is impossible, only unbuilt or manual
        CHECK(capability.message.size() > 40);
    }
    for (const auto& [feature, capability] : m.entries()) {
        INFO(feature);
        CHECK(known.count(feature) == 1);  // no feature outside the shared list
    }
}

TEST_CASE("only ports and mounts are ManualWorkaround, the rest is UnderDevelopment", "[hyperv][capabilities]") {
    const std::set<std::string> manual{"network.port-publish", "fs.mount", "fs.mount.readonly"};
    const auto m = matrix();
    for (auto feature : k_features) {
        INFO(feature);
        const auto expected = manual.count(std::string(feature)) ? CapabilityStatus::ManualWorkaround
                                                                 : CapabilityStatus::UnderDevelopment;
        CHECK(m.get(feature).status == expected);
    }
}

TEST_CASE("the manual plans name the commands to run", "[hyperv][capabilities]") {
    const auto m = matrix();
    const auto ports = m.get("network.port-publish").message;
    CHECK_THAT(ports, Catch::Contains("netsh interface portproxy add v4tov4 listenaddress=127.0.0.1"));
    CHECK_THAT(ports, Catch::Contains("netsh interface portproxy delete v4tov4"));
    CHECK_THAT(ports, Catch::Contains("UDP"));
    const auto mount = m.get("fs.mount").message;
    CHECK_THAT(mount, Catch::Contains("New-SmbShare") && Catch::Contains("-ReadAccess") &&
                          Catch::Contains("mount -t cifs") && Catch::Contains("-o ro,"));
    const auto readonly = m.get("fs.mount.readonly").message;
    CHECK_THAT(readonly, Catch::Contains("-ReadAccess") && Catch::Contains("`ro`"));
}

TEST_CASE("the network entries say plainly that nothing is enforced yet", "[hyperv][capabilities]") {
    const auto m = matrix();
    CHECK_THAT(m.get("network.acl").message, Catch::Contains("unrestricted egress"));
    CHECK_THAT(m.get("network.deny-lan").message, Catch::Contains("reaches the LAN"));
    CHECK_THAT(m.get("view").message, Catch::Contains("enhanced session"));
}

TEST_CASE("the matrix does not depend on the host platform", "[hyperv][capabilities]") {
    const auto on_mac = provider::hyperv::capabilities(Platform(true));
    const auto elsewhere = provider::hyperv::capabilities(Platform(false));
    REQUIRE(on_mac.entries().size() == elsewhere.entries().size());
    for (auto feature : k_features) {
        INFO(feature);
        CHECK(on_mac.get(feature).status == elsewhere.get(feature).status);
        CHECK(on_mac.get(feature).message == elsewhere.get(feature).message);
    }
}
