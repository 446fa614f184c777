// delete tolerates every piece being absent, removes only what is marked as
// the sandbox's own, and removes the bridge before the ACL it uses. Driven
// through a scripted Client (agentctl's own interface; the real daemon runs
// the same flows in the integration suite, including after a killed create).
#include <catch2/catch.hpp>

#include <chrono>
#include <sstream>

#include "provider/incus/acl_rules.hpp"
#include "provider/incus/egress_host.hpp"
#include "provider/incus/client.hpp"
#include "provider/incus/incus_provider.hpp"
#include "provider/incus/naming.hpp"
#include "support/provider_context.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

class ScriptedClient final : public Client {
public:
    std::map<std::string, Json> objects;  // path -> metadata for GETs; absent = 404
    std::vector<std::string> calls;

    Response query(std::string_view method, std::string_view path, const Json*) override {
        const std::string call = std::string(method) + " " + std::string(path);
        calls.push_back(call);
        Response response;
        response.status_code = 200;
        if (path == "/1.0/operations?recursion=1") {
            response.metadata = Json{{"running", Json::array()}};
            return response;
        }
        std::string bare(path.substr(0, path.find('?')));
        if (!objects.contains(bare)) throw NotFound("not found: " + bare);
        if (method == "GET") response.metadata = objects[bare];
        if (method == "DELETE") objects.erase(bare);
        return response;
    }
    Json wait(std::string_view, int) override { return Json{{"status", "Success"}}; }
    std::string get_raw(std::string_view) override { return {}; }
    [[nodiscard]] bool preview() const override { return false; }
};

class Lines final : public Reporter {
public:
    void step(std::string_view m) override { text += "step: " + std::string(m) + "\n"; }
    void notice(std::string_view m) override { text += "notice: " + std::string(m) + "\n"; }
    void warning(std::string_view m) override { text += "warning: " + std::string(m) + "\n"; }
    std::string text;
};

struct Fixture : test::ProviderContextFixture<Lines> {
    ScriptedClient* client = nullptr;
    std::unique_ptr<Provider> provider;
    Fixture() {
        auto scripted = std::make_unique<ScriptedClient>();
        client = scripted.get();
        provider = make_provider(context, std::move(scripted), nullptr);
    }
};

Json owned_by(const std::string& sandbox) { return Json{{"config", {{"user.agentctl.sandbox", sandbox}}}}; }

}  // namespace

TEST_CASE("delete of a sandbox with nothing left is an error, and changes nothing", "[remove]") {
    Fixture f;
    CHECK_THROWS_WITH(f.provider->lifecycle().remove("gone", false), Catch::Contains("no sandbox named \"gone\""));
    for (const auto& call : f.client->calls) CHECK_FALSE(call.starts_with("DELETE /1.0/network"));
}

TEST_CASE("delete after a create that died before the instance existed", "[remove]") {
    Fixture f;
    f.client->objects["/1.0/networks/" + bridge_name("half")] = owned_by("half");
    f.client->objects["/1.0/network-acls/agentctl-half"] = owned_by("half");
    f.provider->lifecycle().remove("half", false);
    CHECK(f.client->objects.empty());
    auto& calls = f.client->calls;
    auto net = std::find(calls.begin(), calls.end(), "DELETE /1.0/networks/" + bridge_name("half"));
    auto acl = std::find(calls.begin(), calls.end(), "DELETE /1.0/network-acls/agentctl-half");
    REQUIRE(net != calls.end());
    REQUIRE(acl != calls.end());
    CHECK(net < acl);  // the bridge uses the ACL: it goes first
}

TEST_CASE("delete leaves alone a bridge or ACL that is not the sandbox's", "[remove]") {
    Fixture f;
    f.client->objects["/1.0/networks/" + bridge_name("mine")] = owned_by("someone-else");
    f.client->objects["/1.0/network-acls/agentctl-mine"] = owned_by("mine");
    f.provider->lifecycle().remove("mine", false);
    CHECK(f.client->objects.contains("/1.0/networks/" + bridge_name("mine")));
    CHECK_FALSE(f.client->objects.contains("/1.0/network-acls/agentctl-mine"));
    CHECK_THAT(f.reporter.text, Catch::Contains("belongs to \"someone-else\""));
}

TEST_CASE("delete refuses a running sandbox without --force and an instance agentctl did not make", "[remove]") {
    Fixture f;
    f.client->objects["/1.0/instances/web"] =
        Json{{"name", "web"}, {"status", "Running"}, {"config", {{"user.agentctl.managed", "true"}}}};
    CHECK_THROWS_WITH(f.provider->lifecycle().remove("web", false), Catch::Contains("is running"));
    CHECK(f.client->objects.contains("/1.0/instances/web"));
    f.client->objects["/1.0/instances/other"] =
        Json{{"name", "other"}, {"status", "Stopped"}, {"config", Json::object()}};
    CHECK_THROWS_WITH(f.provider->lifecycle().remove("other", true), Catch::Contains("not created by agentctl"));
    CHECK(f.client->objects.contains("/1.0/instances/other"));
}

TEST_CASE("delete removes a bridge a cluster create left pending (defined on members, never created)", "[remove]") {
    Fixture f;
    // Incus keeps no config on a pending definition but the member-specific keys.
    f.client->objects["/1.0/networks/" + bridge_name("half")] =
        Json{{"status", "Pending"}, {"config", Json::object()}, {"locations", {"m1", "m2"}}};
    const auto start = std::chrono::steady_clock::now();
    f.provider->lifecycle().remove("half", false);
    CHECK(f.client->objects.empty());
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));  // not waited on
}
