// delete tolerates every piece being absent, removes only what is marked as
// the sandbox's own, and removes the bridge before the ACL it uses. Driven
// through a scripted Client (agentctl's own interface; the real daemon runs
// the same flows in the integration suite, including after a killed create).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>

#include "provider/incus/network/acl_rules.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/lifecycle/incus_provider.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "support/provider_context.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

class ScriptedClient final : public Client {
public:
    std::map<std::string, Json> objects;  // path -> metadata for GETs; absent = 404
    std::vector<std::string> calls;
    // "METHOD PATH" -> how many more times Incus refuses it for a host
    // interface that went away (transient), or for good (-1: a plain error).
    std::map<std::string, int> refusals;
    // What Incus says when it refuses (a host interface that went away unless set).
    std::string refusal_error =
        "Failed to delete bridge children interfaces: Failed to run: ip -d -j link show agc-other: exit "
        "status 1 (Device \"agc-other\" does not exist.)";
    std::function<void()> on_refusal = [] {};
    Json running_operations = Json::array();  // GET /1.0/operations?recursion=1 ["running"]
    std::vector<std::string> waited;          // operation ids waited for

    Response query(std::string_view method, std::string_view path, const Json*) override {
        const std::string call = std::string(method) + " " + std::string(path);
        calls.push_back(call);
        if (auto it = refusals.find(call); it != refusals.end() && it->second != 0) {
            if (it->second < 0) throw IncusError("Incus refused " + call + ": boom", "", 500);
            --it->second;
            on_refusal();
            throw IncusError("Incus refused " + call + ": " + refusal_error, "", 500, classify_refusal(refusal_error));
        }
        Response response;
        response.status_code = 200;
        if (path == "/1.0/operations?recursion=1") {
            response.metadata = Json{{"running", running_operations}};
            running_operations = Json::array();
            return response;
        }
        std::string bare(path.substr(0, path.find('?')));
        if (method == "PUT" && bare.ends_with("/state")) {
            objects.at(bare.substr(0, bare.size() - 6))["status"] = "Stopped";
            return response;
        }
        if (method == "GET" && bare == "/1.0/instances") {
            // The instances whose config matches the filter: none came from the warm pool here.
            response.metadata = Json::array();
            return response;
        }
        if (!objects.contains(bare)) throw NotFound("not found: " + bare);
        if (method == "GET") response.metadata = objects[bare];
        if (method == "DELETE") objects.erase(bare);
        return response;
    }
    Json wait(std::string_view operation, int) override {
        waited.emplace_back(operation);
        return Json{{"status", "Success"}};
    }
    std::string get_raw(std::string_view) override { return {}; }
    [[nodiscard]] bool preview() const override { return false; }
};

// The host's side of a sandbox (processes, nft table, state), recording what
// delete asks of it.
class RecordingEgress final : public EgressHost {
public:
    std::vector<std::string>& done;
    explicit RecordingEgress(std::vector<std::string>& log) : done(log) {}
    void write_policy(const EgressSite&, const policy::NetworkPolicy&) override {}
    void start_proxy(const EgressSite&) override {}
    bool stop_proxy(const EgressSite& site) override { return record("stop proxy " + site.sandbox); }
    [[nodiscard]] ProxyStatus proxy_status(const EgressSite&) override { return {}; }
    int print_network_log(const EgressSite&, const LogRequest&, std::ostream&) override { return 0; }
    [[nodiscard]] bool runs_resolver() const override { return true; }
    void start_resolver(const EgressSite&, const ResolverSpec&, bool) override {}
    bool stop_resolver(const EgressSite& site) override { return record("stop resolver " + site.sandbox); }
    [[nodiscard]] int resolver_pid(const EgressSite&) override { return 0; }
    void install_firewall(const FirewallSpec&) override {}
    void remove_firewall(const std::string& bridge) override { record("remove firewall " + bridge); }
    std::string forget_connections(const std::vector<std::string>&, const std::vector<std::string>&) override {
        return {};
    }
    void remove_state(const EgressSite& site) override { record("remove state " + site.sandbox); }
    [[nodiscard]] ProxyPlacement placement() const override { return ProxyPlacement::Host; }
    [[nodiscard]] bool host_firewall() const override { return true; }

private:
    bool record(std::string what) {
        done.push_back(std::move(what));
        return true;
    }
};

struct Fixture : test::ProviderContextFixture<> {
    ScriptedClient* client = nullptr;
    std::vector<std::string> host;  // what was done on the host's side (RecordingEgress)
    std::unique_ptr<Provider> provider;
    explicit Fixture(bool record_host = false) {
        auto scripted = std::make_unique<ScriptedClient>();
        client = scripted.get();
        provider = make_provider(context, std::move(scripted),
                                 record_host ? std::make_unique<RecordingEgress>(host) : nullptr);
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
    CHECK_THAT(f.reporter.text(), Catch::Contains("belongs to \"someone-else\""));
}

TEST_CASE("delete refuses a running sandbox without --force and an instance agentctl did not make", "[remove]") {
    Fixture f;
    f.client->objects["/1.0/instances/web"] = Json{
        {"name", "web"}, {"type", "container"}, {"status", "Running"}, {"config", {{"user.agentctl.managed", "true"}}}};
    CHECK_THROWS_WITH(f.provider->lifecycle().remove("web", false), Catch::Contains("is running"));
    CHECK(f.client->objects.contains("/1.0/instances/web"));
    f.client->objects["/1.0/instances/other"] =
        Json{{"name", "other"}, {"type", "container"}, {"status", "Stopped"}, {"config", Json::object()}};
    CHECK_THROWS_WITH(f.provider->lifecycle().remove("other", true), Catch::Contains("not created by agentctl"));
    CHECK(f.client->objects.contains("/1.0/instances/other"));
}

TEST_CASE("delete waits for what a killed create left running on the instance, in any project", "[remove]") {
    Fixture f;
    f.client->objects["/1.0/instances/killed"] = Json{{"name", "killed"},
                                                      {"type", "container"},
                                                      {"status", "Stopped"},
                                                      {"config", {{"user.agentctl.managed", "true"}}}};
    // Outside the default project Incus names the instance with its project.
    f.client->running_operations = Json::array(
        {Json{{"id", "op-other"}, {"resources", {{"instances", {"/1.0/instances/killed-2"}}}}},
         Json{{"id", "op-create"}, {"resources", {{"instances", {"/1.0/instances/killed?project=agentctl-tests"}}}}}});
    f.provider->lifecycle().remove("killed", true);
    CHECK(f.client->waited == std::vector<std::string>{"op-create"});
    CHECK(f.client->objects.empty());
}

TEST_CASE("delete --force stops an instance that was started after it was read", "[remove]") {
    Fixture f;
    const std::string instance = "/1.0/instances/late";
    f.client->objects[instance] = Json{{"name", "late"},
                                       {"type", "container"},
                                       {"status", "Stopped"},
                                       {"config", {{"user.agentctl.managed", "true"}}}};
    f.client->refusals["DELETE " + instance] = 1;
    f.client->refusal_error = "Instance is running";
    f.client->on_refusal = [&] { f.client->objects[instance]["status"] = "Running"; };
    f.provider->lifecycle().remove("late", true);
    CHECK(f.client->objects.empty());
    CHECK(std::count(f.client->calls.begin(), f.client->calls.end(), "PUT " + instance + "/state") == 1);

    // Without --force, the sandbox that is running now is refused, and stays.
    f.client->objects[instance] = Json{{"name", "late"},
                                       {"type", "container"},
                                       {"status", "Stopped"},
                                       {"config", {{"user.agentctl.managed", "true"}}}};
    f.client->refusals["DELETE " + instance] = 1;
    CHECK_THROWS_WITH(f.provider->lifecycle().remove("late", false), Catch::Contains("late is running"));
    CHECK(f.client->objects.contains(instance));
}

TEST_CASE("delete takes the host's locks in the context's lock directory", "[remove]") {
    Fixture f;
    f.client->objects["/1.0/networks/" + bridge_name("locks")] = owned_by("locks");
    f.provider->lifecycle().remove("locks", false);
    CHECK(std::filesystem::exists(f.locks.path() + "/agentctl-incus-sandbox-locks.lock"));
    CHECK(std::filesystem::exists(f.locks.path() + "/agentctl-incus-network.lock"));
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

TEST_CASE("delete asks Incus again when a host interface went away while it tore the bridge down", "[remove]") {
    Fixture f;
    const auto bridge = "/1.0/networks/" + bridge_name("par");
    f.client->objects[bridge] = owned_by("par");
    f.client->objects["/1.0/network-acls/agentctl-par"] = owned_by("par");
    f.client->refusals["DELETE " + bridge] = 2;
    f.provider->lifecycle().remove("par", false);
    CHECK(f.client->objects.empty());
    CHECK(std::count(f.client->calls.begin(), f.client->calls.end(), "DELETE " + bridge) == 3);
}

TEST_CASE("a bridge that cannot go keeps its ACL but not the rest; the next delete finishes", "[remove]") {
    Fixture f(true);
    const auto bridge = bridge_name("half");
    f.client->objects["/1.0/instances/half"] = Json{{"name", "half"},
                                                    {"type", "container"},
                                                    {"status", "Stopped"},
                                                    {"config", {{"user.agentctl.managed", "true"}}}};
    f.client->objects["/1.0/networks/" + bridge] = owned_by("half");
    f.client->objects["/1.0/network-acls/agentctl-half"] = owned_by("half");
    f.client->refusals["DELETE /1.0/networks/" + bridge] = -1;
    CHECK_THROWS_WITH(f.provider->lifecycle().remove("half", false), Catch::Contains("boom"));
    CHECK_FALSE(f.client->objects.contains("/1.0/instances/half"));
    CHECK(f.client->objects.contains("/1.0/networks/" + bridge));
    CHECK(f.client->objects.contains("/1.0/network-acls/agentctl-half"));  // the bridge still uses it
    CHECK(f.host == std::vector<std::string>{"stop proxy half", "stop resolver half", "remove firewall " + bridge,
                                             "remove state half"});
    f.client->refusals.clear();
    f.provider->lifecycle().remove("half", false);
    CHECK(f.client->objects.empty());
}

TEST_CASE("a delete whose instance cannot go leaves its enforcement in place", "[remove]") {
    Fixture f(true);
    f.client->objects["/1.0/instances/kept"] = Json{{"name", "kept"},
                                                    {"type", "container"},
                                                    {"status", "Stopped"},
                                                    {"config", {{"user.agentctl.managed", "true"}}}};
    f.client->objects["/1.0/networks/" + bridge_name("kept")] = owned_by("kept");
    f.client->refusals["DELETE /1.0/instances/kept"] = -1;
    CHECK_THROWS_WITH(f.provider->lifecycle().remove("kept", false), Catch::Contains("boom"));
    CHECK(f.client->objects.contains("/1.0/networks/" + bridge_name("kept")));
    CHECK(f.host.empty());
}
