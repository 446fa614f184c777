// The Incus sandbox record (sandbox_record.hpp): what create writes reads back
// field by field, an absent key keeps its default, and a value agentctl never
// writes is refused with the instance, the key and what to do.
#include <catch2/catch.hpp>

#include "provider/incus/client/payloads.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/sandbox_record.hpp"
#include "support/error_text.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;
using agentctl::test::error_and_hint_of;
using agentctl::test::k_no_error;

namespace {

std::string k(std::string_view key) { return std::string(key); }

SandboxSpec sample_spec() {
    SandboxSpec spec;
    spec.name = "tbox";
    spec.image = "agentctl-debian-12";
    spec.user = "dev";
    spec.agent = "claude";
    spec.profiles = {"default", "strict"};
    spec.isolation = Isolation::Vm;
    spec.network.allow_lan = true;
    spec.mounts = {{"/home/u/work", "/workspace", true, "--mount"}, {"/home/u/ref", "/ref", false, "profile default"}};
    spec.ports = {{"0.0.0.0", 8080, 80, "tcp"}, {"127.0.0.1", 5353, 53, "udp"}};
    spec.packages = {"git", "curl"};
    return spec;
}

// An instance as GET /1.0/instances/NAME returns it, with `config`.
Instance instance_with(Json config, std::string type = "container") {
    return parse_instance(
        Json{{"name", "tbox"}, {"type", std::move(type)}, {"status", "Stopped"}, {"config", std::move(config)}});
}

// The config create writes for sample_spec(), with what later steps add.
Json full_config() {
    const auto spec = sample_spec();
    Json config = sandbox_record_config(spec, "agc-0123456789a", *parse_ipv4_net("10.213.0.32/28"), true);
    config[k(key::k_create_pending)] = "true";
    config[k(key::k_agent_installed)] = "true";
    config[k(key::k_uid)] = "1500";
    config[k(key::k_gid)] = "1501";
    config[k(key::k_home)] = "/home/dev";
    config[k(key::k_shell)] = "/bin/bash";
    config[k(key::k_egress)] = "instance";
    config[k(key::k_resolver)] = std::string(resolver_record(BridgeResolver::Host));
    config.update(Json(host_record_config({k_host_id_first + 7, "/var/lib/agentctl/incus/tbox"})));
    config[k(key::k_confinement)] = "verified (7/7 probes, 2026-01-02T03:04:05Z)";
    config[k(key::k_confinement_probes)] =
        R"([{"name":"direct-bypass","verdict":"held","detail":"refused"},{"name":"dns","verdict":"skipped"}])";
    config[k(key::k_confinement_source)] = "host";
    config[k(key::k_confinement_at)] = "2026-01-02T03:04:05Z";
    config[k(key::k_confinement_pid)] = "4242";
    config[k(key::k_confinement_firewall)] = "00112233aabbccdd";
    return config;
}

}  // namespace

TEST_CASE("the record create writes reads back field by field", "[sandbox_record]") {
    const auto spec = sample_spec();
    const auto record = read_sandbox_record(instance_with(full_config()));
    CHECK(record.name == "tbox");
    CHECK(record.managed);
    CHECK(record.role.empty());
    CHECK(record.is_sandbox());
    CHECK_FALSE(record.is_companion());
    CHECK(record.create_pending);
    CHECK(record.unfinished());
    CHECK(record.isolation == Isolation::Vm);  // the record's word, not the instance's type
    CHECK(record.image == "agentctl-debian-12");
    CHECK(record.user == "dev");
    REQUIRE(record.guest);
    CHECK(record.guest->name == "dev");
    CHECK(record.guest->uid == 1500);
    CHECK(record.guest->gid == 1501);
    CHECK(record.guest->home == "/home/dev");
    CHECK(record.guest->shell == "/bin/bash");
    CHECK(record.profiles == spec.profiles);
    REQUIRE(record.network);
    CHECK(record.network->allow_lan);
    CHECK(policy::to_policy_file(*record.network) == policy::to_policy_file(spec.network));
    CHECK(record.mounts == spec.mounts);
    CHECK(record.ports == spec.ports);
    CHECK(record.packages == spec.packages);
    CHECK(record.widenings == widenings(spec));
    CHECK(record.widenings.size() == 3);  // LAN open, the writable mount, the port on 0.0.0.0
    CHECK(record.agent == "claude");
    CHECK(record.agent_installed);
    CHECK(record.bridge == "agc-0123456789a");
    CHECK(record.acl == "agentctl-tbox");
    REQUIRE(record.subnet);
    CHECK(record.subnet->to_string() == "10.213.0.33/28");
    CHECK(record.resolver == BridgeResolver::Host);
    CHECK(record.placement == ProxyPlacement::Instance);
    CHECK(record.host.uid == k_host_id_first + 7);
    CHECK(record.host.state_dir == "/var/lib/agentctl/incus/tbox");
    CHECK(record.confinement.state == ConfinementState::Verified);
    CHECK(record.confinement.detail == "(7/7 probes, 2026-01-02T03:04:05Z)");
    CHECK(record.evidence.checked_at == "2026-01-02T03:04:05Z");
    CHECK(record.evidence.source == "host");
    REQUIRE(record.evidence.probes.size() == 2);
    CHECK(record.evidence.probes[0].name == "direct-bypass");
    CHECK(record.evidence.probes[0].verdict == "held");
    CHECK(record.evidence.probes[0].detail == "refused");
    CHECK(record.evidence.probes[1].detail.empty());
    CHECK(record.confinement_pid == 4242);
    CHECK(record.confinement_firewall == "00112233aabbccdd");
    // What widenings() reads: the record's, or another network policy with the record's mounts.
    CHECK(widenings(widening_view(record)) == record.widenings);
    CHECK(widening_view(record, policy::NetworkPolicy{}).network.allow_lan == false);
}

TEST_CASE("an absent or empty key keeps its default", "[sandbox_record]") {
    for (const auto& config :
         {Json::object(),
          Json{{k(key::k_managed), ""}, {k(key::k_mounts), ""}, {k(key::k_network), ""}, {k(key::k_resolver), ""}}}) {
        const auto record = read_sandbox_record(instance_with(config));
        CHECK_FALSE(record.managed);
        CHECK_FALSE(record.is_sandbox());
        CHECK_FALSE(record.create_pending);
        CHECK(record.isolation == Isolation::Container);
        CHECK(record.image.empty());
        CHECK_FALSE(record.guest);
        CHECK(record.profiles.empty());
        CHECK_FALSE(record.network);
        CHECK(record.mounts.empty());
        CHECK(record.ports.empty());
        CHECK(record.packages.empty());
        CHECK(record.widenings.empty());
        CHECK_FALSE(record.agent_installed);
        CHECK(record.acl.empty());
        CHECK_FALSE(record.subnet);
        CHECK(record.resolver == BridgeResolver::Incus);  // sandboxes made before agentctl ran one
        CHECK(record.placement == ProxyPlacement::Host);
        CHECK_FALSE(record.host.recorded());
        CHECK(record.confinement.state == ConfinementState::Unknown);
        CHECK(record.evidence.probes.empty());
        CHECK(record.confinement_pid == 0);
    }
    // Without the key, the isolation is the instance's type.
    CHECK(read_sandbox_record(instance_with(Json::object(), "virtual-machine")).isolation == Isolation::Vm);
    // An instance with no config at all (a user's) reads as not agentctl's.
    CHECK_FALSE(
        read_instance_marks(parse_instance(Json{{"name", "other"}, {"type", "container"}, {"status", "Stopped"}}))
            .managed);
    // A user without a shell gets /bin/sh; the "incus" resolver word reads as Incus.
    auto config = Json{{k(key::k_uid), "1000"}, {k(key::k_gid), "1000"}, {k(key::k_resolver), "incus"}};
    const auto record = read_sandbox_record(instance_with(config));
    REQUIRE(record.guest);
    CHECK(record.guest->shell == "/bin/sh");
    CHECK(record.resolver == BridgeResolver::Incus);
}

TEST_CASE("a value agentctl never writes names the instance and the key", "[sandbox_record]") {
    struct Case {
        std::string_view key;
        std::string value;
        std::string why;
    };
    const Case cases[] = {
        {key::k_agent_installed, "maybe", "\"maybe\" is not true or false"},
        {key::k_isolation, "lxc", "\"lxc\" is not vm or container"},
        {key::k_uid, "abc", "\"abc\" is not a whole number"},
        {key::k_network, "{not json", "its value is not JSON"},
        {key::k_network, "{}", "malformed policy file: field version: missing"},
        {key::k_mounts, "[1]", "item 0 is not a JSON object"},
        {key::k_mounts, R"([{"host_path":"/a"}])", "item 0 has no text \"guest_path\""},
        {key::k_mounts, R"([{"host_path":"/a","guest_path":"/b","writable":"yes"}])",
         "item 0 has \"writable\" that is not true or false"},
        {key::k_ports, R"({"host_port":1})", "its value is not a JSON list"},
        {key::k_ports, R"([{"host_port":70000,"guest_port":1}])", "item 0 has no port number \"host_port\""},
        {key::k_profiles, R"({"a":1})", "its value is not a JSON list of strings"},
        {key::k_packages, "[1]", "its value is not a JSON list of strings"},
        {key::k_widenings, "not json", "its value is not JSON"},
        {key::k_subnet, "10.0.0.300/28", "\"10.0.0.300/28\" is not an IPv4 address/prefix"},
        {key::k_resolver, "dnsmasq", "\"dnsmasq\" is not host or incus"},
        {key::k_egress, "cloud", "\"cloud\" is not host or instance"},
        {key::k_confinement_pid, "-3", "\"-3\" is not a whole number"},
        {key::k_confinement_probes, R"([{"verdict":"held"}])", "item 0 has no text \"name\""},
    };
    for (const auto& c : cases) {
        auto config = full_config();
        config[k(c.key)] = c.value;
        INFO(c.key << " = " << c.value);
        CHECK_THAT(error_and_hint_of([&] { (void)read_sandbox_record(instance_with(config)); }),
                   Catch::StartsWith(
                       fmt::format("the Incus instance tbox: {} is not what agentctl writes: {}", c.key, c.why)) &&
                       Catch::EndsWith("\nhint: agentctl writes this key when it creates the sandbox: delete it and "
                                       "create it again (agentctl delete tbox --force)"));
    }
    // A uid without its gid.
    auto config = full_config();
    config.erase(k(key::k_gid));
    CHECK_THAT(error_and_hint_of([&] { (void)read_sandbox_record(instance_with(config)); }),
               Catch::StartsWith("the Incus instance tbox: user.agentctl.gid is not what agentctl writes: it is "
                                 "missing beside user.agentctl.uid\n"));
    // The host record's own check, with the instance named.
    config = full_config();
    config[k(key::k_host_uid)] = "5";
    CHECK_THAT(error_and_hint_of([&] { (void)read_sandbox_record(instance_with(config)); }),
               Catch::StartsWith("the Incus instance tbox: user.agentctl.host.uid is \"5\", not an id of agentctl's "
                                 "range") &&
                   Catch::Contains("recreate the sandbox"));
}

TEST_CASE("delete and gc read only the marks, and those strictly", "[sandbox_record]") {
    auto config = full_config();
    config[k(key::k_network)] = "{damaged";
    const auto marks = read_instance_marks(instance_with(config));
    CHECK(marks.is_sandbox());
    CHECK(marks.unfinished());

    const auto companion = read_instance_marks(instance_with(
        Json{{k(key::k_managed), "true"}, {k(key::k_role), k(key::k_role_egress_proxy)}, {k(key::k_sandbox), "tbox"}}));
    CHECK(companion.is_companion());
    CHECK_FALSE(companion.is_sandbox());
    CHECK(companion.sandbox == "tbox");
    // Not agentctl's: a role means nothing without the managed mark.
    CHECK_FALSE(read_instance_marks(instance_with(Json{{k(key::k_role), k(key::k_role_egress_proxy)}})).is_companion());

    for (const auto key : {key::k_managed, key::k_create_pending}) {
        INFO(key);
        const auto bad = instance_with(Json{{k(key), "yes"}});
        const auto expected = fmt::format(
            "the Incus instance tbox: {} is not what agentctl writes: \"yes\" is not true or false\nhint: set it right "
            "(incus config set tbox KEY true, or incus config unset tbox KEY), or remove the instance with incus "
            "delete tbox",
            key);
        CHECK(error_and_hint_of([&] { (void)read_instance_marks(bad); }) == expected);
        CHECK(error_and_hint_of([&] { (void)read_sandbox_record(bad); }) == expected);
    }
    CHECK(error_and_hint_of([&] { (void)read_instance_marks(instance_with(full_config())); }) == k_no_error);
}

TEST_CASE("the isolation record and the instance type are one word each way", "[sandbox_record]") {
    for (const auto isolation : {Isolation::Vm, Isolation::Container}) {
        auto config = Json{{k(key::k_isolation), std::string(isolation_record(isolation))}};
        CHECK(read_sandbox_record(instance_with(config)).isolation == isolation);
        CHECK(instance_with(Json::object(), std::string(instance_type_name(isolation))).type == isolation);
    }
    CHECK(isolation_record(Isolation::Vm) == "vm");
    CHECK(instance_type_name(Isolation::Vm) == "virtual-machine");
}
