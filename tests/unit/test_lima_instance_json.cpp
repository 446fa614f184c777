// Parsing `limactl list --json` (fixture: tests/fakes/fixtures/list-running.json,
// shape from lima-vm/lima pkg/limatype/lima_instance.go and lima_yaml.go).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "agentctl/error.hpp"
#include "provider/lima/lima_instance.hpp"
#include "support/build_paths.hpp"

using namespace agentctl::provider::lima;

namespace {

std::string fixture(const std::string& name) {
    std::ifstream in(std::string(agentctl::test::source_dir()) + "/tests/fakes/fixtures/" + name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("an instance whose configuration Lima could not load has none", "[lima]") {
    auto inst = parse_instance_json(fixture("list-broken.json"), "/Users/dev");
    CHECK(inst.status == "Broken");
    CHECK_FALSE(inst.has_config);
    REQUIRE(inst.errors.size() == 1);
    CHECK(inst.errors[0].find("override.yaml") != std::string::npos);
}

TEST_CASE("a running instance is read with its effective configuration", "[lima]") {
    auto inst = parse_instance_json(fixture("list-running.json"), "/Users/dev");
    CHECK(inst.has_config);
    CHECK(inst.name == "tbox");
    CHECK(inst.status == "Running");
    CHECK(inst.vm_type == "vz");
    CHECK(inst.cpus == 2);
    CHECK(inst.memory == 4294967296);
    CHECK(inst.ssh_local_port == 50022);
    CHECK(inst.host_agent_pid == 4242);
    REQUIRE(inst.config.mounts.size() == 2);
    CHECK(inst.config.mounts[0].mount_point == "/workspace");
    CHECK(inst.config.mounts[0].writable);
    // ~ is expanded and a missing mountPoint defaults to the location, as Lima does
    CHECK(inst.config.mounts[1].location == "/Users/dev/src");
    CHECK(inst.config.mounts[1].mount_point == "/Users/dev/src");
    CHECK_FALSE(inst.config.forward_agent);
    CHECK(inst.config.ssh_local_port == 50022);
    CHECK(inst.config.env.at("http_proxy") == "http://192.168.5.2:51234");
    CHECK(inst.config.propagate_proxy_env == false);
    CHECK(inst.config.host_resolver_enabled == true);
    CHECK(inst.config.user_name == "agent");
    CHECK(inst.config.image_locations.size() == 1);
}

TEST_CASE("one instance per line, blank lines are skipped", "[lima]") {
    auto line = fixture("list-running.json");
    while (!line.empty() && line.back() == '\n') line.pop_back();
    auto list = parse_instance_list(line + "\n\n" + line + "\n", "/Users/dev");
    CHECK(list.size() == 2);
}

TEST_CASE("a field of the wrong type is an error naming it", "[lima]") {
    CHECK_THROWS_WITH(parse_instance_json(R"({"name":"x","config":{"ssh":{"forwardAgent":"yes"}}})", "/h"),
                      Catch::Contains("config.ssh.forwardAgent is not a boolean"));
    CHECK_THROWS_WITH(parse_instance_json(R"({"name":"x","config":{"mounts":{}}})", "/h"),
                      Catch::Contains("config.mounts is not an array"));
    CHECK_THROWS_WITH(parse_instance_json("[1,2]", "/h"), Catch::Contains("not a JSON object"));
    CHECK_THROWS_AS(parse_instance_json(R"({"status":"Running"})", "/h"), agentctl::Error);
}
