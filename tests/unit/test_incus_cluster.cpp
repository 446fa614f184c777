// Incus clusters: the member a sandbox goes to (plan_placement), the
// ?target= query, the pending network body, and the calls a create makes in a
// cluster (every member's pending definition, then the global create, then the
// instance on its member), through a scripted Client. The real daemon runs the
// same flow in integration/incus/cluster.sh (a one-member cluster).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "agentctl/error.hpp"
#include "provider/incus/client/api.hpp"
#include "provider/incus/client/cluster.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/lifecycle/incus_provider.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "support/error_text.hpp"
#include "support/provider_context.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

ClusterMember member(std::string name, std::string url) { return ClusterMember{name, url, "Online"}; }

std::vector<policy::IpAddress> addresses(std::initializer_list<const char*> texts) {
    std::vector<policy::IpAddress> out;
    for (const auto* text : texts) out.push_back(*policy::parse_ip_literal(text));
    return out;
}

PlacementRequest cluster_of(std::vector<ClusterMember> members, std::string target, bool confined) {
    PlacementRequest request;
    request.clustered = true;
    request.members = std::move(members);
    request.target = std::move(target);
    request.own_addresses = addresses({"192.0.2.10"});
    request.needs_this_machine = confined;
    return request;
}

std::string error_of(const PlacementRequest& request) {
    return test::error_and_hint_of([&] { (void)plan_placement(request); });
}

}  // namespace

TEST_CASE("with_target adds target=MEMBER to the path, percent-encoded", "[cluster]") {
    CHECK(with_target("/1.0/instances", "node1") == "/1.0/instances?target=node1");
    CHECK(with_target("/1.0/networks?project=p", "node-2.lab") == "/1.0/networks?project=p&target=node-2.lab");
    CHECK(with_target("/1.0/instances", "a b&c=d") == "/1.0/instances?target=a%20b%26c%3Dd");
    CHECK(with_target("/1.0/instances", "@group") == "/1.0/instances?target=%40group");
}

TEST_CASE("url_host reads the address of a member's url", "[cluster]") {
    CHECK(url_host("https://10.0.0.5:8443") == "10.0.0.5");
    CHECK(url_host("https://[fd00::1]:8443") == "fd00::1");
    CHECK(url_host("https://node1.example:8443/") == "node1.example");
    CHECK(url_host("https://10.0.0.5") == "10.0.0.5");
    CHECK(url_host("") == "");
}

TEST_CASE("a member is this machine when its url is loopback or one of this machine's addresses", "[cluster]") {
    const auto own = addresses({"192.0.2.10", "2001:db8::10"});
    CHECK(is_this_machine(member("a", "https://127.0.0.1:8443"), own));
    CHECK(is_this_machine(member("a", "https://[::1]:8443"), own));
    CHECK(is_this_machine(member("a", "https://192.0.2.10:8443"), own));
    CHECK(is_this_machine(member("a", "https://[2001:db8::10]:8443"), own));
    CHECK_FALSE(is_this_machine(member("b", "https://192.0.2.11:8443"), own));
    // A name proves nothing: it could resolve anywhere.
    CHECK_FALSE(is_this_machine(member("c", "https://localhost:8443"), own));
    CHECK_FALSE(is_this_machine(member("d", ""), own));
}

TEST_CASE("placement on a server that is not clustered", "[cluster]") {
    PlacementRequest request;
    CHECK(plan_placement(request).empty());  // Incus places it (there is one server)
    request.target = "node1";
    CHECK(error_of(request) ==
          "--target node1: the Incus server is not a cluster, so there is no member to place the sandbox on\n"
          "hint: leave out --target (the sandbox runs on this server), or use a clustered server (`incus cluster "
          "list` shows the members)");
}

TEST_CASE("placement in a cluster", "[cluster]") {
    const std::vector<ClusterMember> members{member("here", "https://192.0.2.10:8443"),
                                             member("there", "https://192.0.2.11:8443")};
    SECTION("a member of this machine is passed on") {
        CHECK(plan_placement(cluster_of(members, "here", true)) == "here");
    }
    SECTION("an unknown member is refused, naming every member") {
        CHECK(error_of(cluster_of(members, "nowhere", false)) ==
              "--target nowhere: the cluster has no such member (its members: here, there)\n"
              "hint: `incus cluster list` shows the members");
    }
    SECTION("another machine cannot hold a confined sandbox's egress proxy") {
        const auto text = error_of(cluster_of(members, "there", true));
        CHECK_THAT(text,
                   Catch::StartsWith("--target there: that member (https://192.0.2.11:8443) is not this machine"));
        CHECK_THAT(text, Catch::Contains("egress proxy and firewall run on this machine"));
        CHECK_THAT(text, Catch::Contains("hint: place it on this machine (--target here), or run agentctl on there"));
    }
    SECTION("an unconfined sandbox may go to any member") {
        CHECK(plan_placement(cluster_of(members, "there", false)) == "there");
        CHECK(plan_placement(cluster_of(members, "", false)).empty());
    }
    SECTION("without --target a confined sandbox is refused where Incus could pick another machine") {
        const auto text = error_of(cluster_of(members, "", true));
        CHECK_THAT(text, Catch::StartsWith("Incus could place the sandbox on any cluster member (here, there)"));
        CHECK_THAT(text, Catch::EndsWith("hint: place it on this machine: --target here"));
    }
    SECTION("without --target, when every member is this machine, Incus places it") {
        CHECK(plan_placement(cluster_of({member("solo", "https://127.0.0.1:8443")}, "", true)).empty());
    }
    SECTION("no member is this machine") {
        auto request = cluster_of({member("far", "https://198.51.100.1:8443")}, "far", true);
        CHECK_THAT(error_of(request), Catch::Contains("hint: run agentctl on that member, or create the sandbox with "
                                                      "--no-network-policy"));
    }
}

TEST_CASE("a pending network definition carries only the member-specific keys", "[cluster]") {
    const Json network{{"name", "agc-0123456789a"},
                       {"type", "bridge"},
                       {"description", "agentctl sandbox s1"},
                       {"config",
                        {{"ipv4.address", "10.213.0.1/28"},
                         {"ipv6.address", "none"},
                         {"security.acls", "agentctl-s1"},
                         {"user.agentctl.sandbox", "s1"},
                         {"bridge.external_interfaces", "eth1"},
                         {"tunnel.t1.local", "192.0.2.1"},
                         {"tunnel.t1.protocol", "vxlan"}}}};
    CHECK(pending_network_payload(network) ==
          Json{{"name", "agc-0123456789a"},
               {"type", "bridge"},
               {"config", {{"bridge.external_interfaces", "eth1"}, {"tunnel.t1.local", "192.0.2.1"}}}});
    CHECK(is_member_specific_network_key("parent"));
    CHECK(is_member_specific_network_key("bgp.ipv4.nexthop"));
    CHECK(is_member_specific_network_key("tunnel.x.interface"));
    CHECK_FALSE(is_member_specific_network_key("tunnel..interface"));
    CHECK_FALSE(is_member_specific_network_key("tunnel.x.protocol"));
    CHECK_FALSE(is_member_specific_network_key("ipv4.address"));
}

namespace {

// A cluster of two members; the instance POST fails, which ends the create
// (and its cleanup runs against a daemon that has nothing).
class ClusterClient final : public Client {
public:
    bool clustered = true;
    std::vector<std::string> calls;
    std::vector<Json> bodies;

    Response query(std::string_view method, std::string_view path, const Json* body) override {
        calls.push_back(std::string(method) + " " + std::string(path));
        bodies.push_back(body ? *body : Json());
        Response response;
        response.status_code = 200;
        if (method == "GET" && path == "/1.0") {
            Json extensions = Json::array();
            for (const auto& ext : required_extensions()) extensions.push_back(ext.name);
            response.metadata = Json{{"api_extensions", extensions},
                                     {"environment", {{"server_clustered", clustered}, {"driver", "lxc"}}}};
        } else if (method == "GET" && path == "/1.0/cluster/members?recursion=1") {
            response.metadata = Json::array({Json{{"server_name", "m1"}, {"url", "https://127.0.0.1:8443"}},
                                             Json{{"server_name", "m2"}, {"url", "https://192.0.2.77:8443"}}});
        } else if (method == "GET" && (path == "/1.0/images/aliases/img")) {
            response.metadata = Json{{"name", "img"}};
        } else if (method == "GET" && (path.starts_with("/1.0/networks?") || path.starts_with("/1.0/instances?"))) {
            response.metadata = Json::array();
        } else if (method == "GET" && path == "/1.0/operations?recursion=1") {
            response.metadata = Json{{"running", Json::array()}};
        } else if (method == "POST" && path.starts_with("/1.0/instances")) {
            throw Error("stop here");
        } else if (method == "GET" || method == "DELETE") {
            throw NotFound("not found");
        }
        return response;
    }
    Json wait(std::string_view, int) override { return Json{{"status", "Success"}}; }
    std::string get_raw(std::string_view) override { return {}; }
    [[nodiscard]] bool preview() const override { return false; }

    [[nodiscard]] std::vector<std::string> posts() const {
        std::vector<std::string> out;
        for (const auto& call : calls) {
            if (call.starts_with("POST ")) out.push_back(call);
        }
        return out;
    }
};

struct Fixture : test::ProviderContextFixture<> {
    ClusterClient* client = nullptr;
    std::unique_ptr<Provider> provider;
    Fixture() {
        context.runtime_dir =
            (std::filesystem::temp_directory_path() / ("agentctl-test-cluster-" + std::to_string(getpid()))).string();
        auto scripted = std::make_unique<ClusterClient>();
        client = scripted.get();
        provider = make_provider(context, std::move(scripted), nullptr);
    }
    ~Fixture() { std::filesystem::remove_all(context.runtime_dir); }
};

SandboxSpec spec_on(std::string target, bool confined) {
    SandboxSpec spec;
    spec.name = "s1";
    spec.image = "img";
    spec.isolation = Isolation::Container;
    spec.network.enabled = confined;
    spec.target = std::move(target);
    return spec;
}

}  // namespace

TEST_CASE("create in a cluster: the bridge pending on every member, then created; the instance on its member",
          "[cluster]") {
    Fixture f;
    CHECK_THROWS_WITH(f.provider->lifecycle().create(spec_on("m2", false)), "stop here");
    const auto bridge = bridge_name("s1");
    CHECK(f.client->posts() == std::vector<std::string>{"POST /1.0/networks?target=m1", "POST /1.0/networks?target=m2",
                                                        "POST /1.0/networks", "POST /1.0/instances?target=m2"});
    // The pending definitions name the bridge and nothing else; the global create has its config.
    for (std::size_t i = 0; i < f.client->calls.size(); ++i) {
        if (f.client->calls[i].starts_with("POST /1.0/networks?target=")) {
            CHECK(f.client->bodies[i] == Json{{"name", bridge}, {"type", "bridge"}, {"config", Json::object()}});
        } else if (f.client->calls[i] == "POST /1.0/networks") {
            CHECK(f.client->bodies[i]["config"].contains("ipv4.address"));
        }
    }
}

TEST_CASE("create on a standalone server: one network POST, no target", "[cluster]") {
    Fixture f;
    f.client->clustered = false;
    CHECK_THROWS_WITH(f.provider->lifecycle().create(spec_on("", false)), "stop here");
    CHECK(f.client->posts() == std::vector<std::string>{"POST /1.0/networks", "POST /1.0/instances"});
}

TEST_CASE("create refuses a confined sandbox on another machine's member before making anything", "[cluster]") {
    Fixture f;
    CHECK_THROWS_WITH(f.provider->lifecycle().create(spec_on("m2", true)), Catch::Contains("is not this machine"));
    CHECK(f.client->posts().empty());
    Fixture standalone;
    standalone.client->clustered = false;
    CHECK_THROWS_WITH(standalone.provider->lifecycle().create(spec_on("m1", false)),
                      Catch::Contains("is not a cluster"));
    CHECK(standalone.client->posts().empty());
}

TEST_CASE("a preview of create --target prints the definition on the member and the placed instance", "[cluster]") {
    Fixture f;
    std::ostringstream lines;
    f.context.preview = true;
    auto provider = make_provider(f.context, make_preview_client(lines), nullptr);
    provider->lifecycle().create(spec_on("m1", true));
    const auto text = lines.str();
    const auto pending = text.find("incus query -X POST --data '{\"config\":{},\"name\":\"" + bridge_name("s1") +
                                   "\",\"type\":\"bridge\"}' '/1.0/networks?target=m1'");
    const auto global = text.find("/1.0/networks\n");
    const auto instance = text.find("'/1.0/instances?target=m1'");
    REQUIRE(pending != std::string::npos);
    REQUIRE(global != std::string::npos);
    REQUIRE(instance != std::string::npos);
    CHECK(pending < global);
    CHECK(global < instance);
}
