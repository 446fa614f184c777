// Layering, field by field: a later layer can only tighten what an earlier one
// closed; lists add up; resources and viewer take the later non-zero value.
#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "policy/sandbox_spec.hpp"

using namespace agentctl;
using namespace agentctl::policy;

namespace {

ProfileSpec with_deny_lan(std::optional<bool> value) {
    ProfileSpec spec;
    spec.deny_lan = value;
    return spec;
}

}  // namespace

TEST_CASE("merge: denyLAN cannot be set back to false by a later layer", "[merge]") {
    CHECK(merge_profile_specs(with_deny_lan(true), with_deny_lan(false)).deny_lan == true);
    CHECK(merge_profile_specs(with_deny_lan(false), with_deny_lan(true)).deny_lan == true);
    CHECK(merge_profile_specs(with_deny_lan(std::nullopt), with_deny_lan(false)).deny_lan == false);
    CHECK(merge_profile_specs(with_deny_lan(false), with_deny_lan(std::nullopt)).deny_lan == false);
    CHECK_FALSE(merge_profile_specs(with_deny_lan(std::nullopt), with_deny_lan(std::nullopt)).deny_lan.has_value());
}

TEST_CASE("merge: allow entries add up, each keeping its origin", "[merge]") {
    ProfileSpec base;
    base.allow.push_back(parse_allow_entry("a.example.com:443", "profile org (/o/org.yaml:9)"));
    ProfileSpec later;
    later.allow.push_back(parse_allow_entry("b.example.com", "profile mine (/u/mine.yaml:7)"));
    later.allow.push_back(parse_allow_entry("a.example.com:443", "profile org (/o/org.yaml:9)"));  // exact duplicate
    later.allow.push_back(parse_allow_entry("a.example.com:443", "profile mine (/u/mine.yaml:8)"));
    auto merged = merge_profile_specs(base, later);
    REQUIRE(merged.allow.size() == 3);
    CHECK(merged.allow[0].origin == "profile org (/o/org.yaml:9)");
    CHECK(merged.allow[1].entry() == "b.example.com");
    CHECK(merged.allow[2].origin == "profile mine (/u/mine.yaml:8)");
}

TEST_CASE("merge: allowPresets, packages and allow files are a de-duplicated union", "[merge]") {
    ProfileSpec base;
    base.allow_presets = {"apt", "pypi"};
    base.packages = {"git", "curl"};
    base.allow_files = {"/o/hosts.txt"};
    ProfileSpec later;
    later.allow_presets = {"pypi", "npm"};
    later.packages = {"curl", "jq"};
    later.allow_files = {"/o/hosts.txt", "/u/more.txt"};
    auto merged = merge_profile_specs(base, later);
    CHECK(merged.allow_presets == std::vector<std::string>{"apt", "pypi", "npm"});
    CHECK(merged.packages == std::vector<std::string>{"git", "curl", "jq"});
    CHECK(merged.allow_files == std::vector<std::string>{"/o/hosts.txt", "/u/more.txt"});
}

TEST_CASE("merge: ports are appended and a repeated host port is an error", "[merge]") {
    ProfileSpec base;
    base.ports.push_back({"127.0.0.1", 8080, 80, "tcp"});
    ProfileSpec later;
    later.ports.push_back({"127.0.0.1", 8080, 80, "udp"});
    auto merged = merge_profile_specs(base, later);
    CHECK(merged.ports.size() == 2);
    later.ports.push_back({"127.0.0.1", 8080, 81, "tcp"});
    CHECK_THROWS_WITH(merge_profile_specs(base, later),
                      "host port 8080/tcp is forwarded twice by the profiles being layered");
}

TEST_CASE("merge: dns servers replace, disabled is ORed", "[merge]") {
    ProfileSpec base;
    base.dns.servers = std::vector<std::string>{"192.0.2.53"};
    base.dns.disabled = true;
    ProfileSpec later;
    later.dns.disabled = false;
    auto merged = merge_profile_specs(base, later);
    CHECK(merged.dns.servers == std::vector<std::string>{"192.0.2.53"});
    CHECK(merged.dns.disabled == true);
    later.dns.servers = std::vector<std::string>{"198.51.100.53"};
    CHECK(merge_profile_specs(base, later).dns.servers == std::vector<std::string>{"198.51.100.53"});
    ProfileSpec unset;
    CHECK(merge_profile_specs(unset, later).dns.disabled == false);
    CHECK_FALSE(merge_profile_specs(unset, unset).dns.disabled.has_value());
}

TEST_CASE("merge: resources and viewer take the later non-zero value", "[merge]") {
    ProfileSpec base;
    base.resources = {2, 4ULL << 30, 20ULL << 30};
    base.viewer = "spice";
    ProfileSpec later;
    later.resources.memory_bytes = 8ULL << 30;
    auto merged = merge_profile_specs(base, later);
    CHECK(merged.resources.cpu_cores == 2);
    CHECK(merged.resources.memory_bytes == 8ULL << 30);
    CHECK(merged.resources.disk_bytes == 20ULL << 30);
    CHECK(merged.viewer == "spice");
    later.resources.cpu_cores = 1;
    later.resources.disk_bytes = 10ULL << 30;
    later.viewer = "vnc";
    merged = merge_profile_specs(base, later);
    CHECK(merged.resources.cpu_cores == 1);
    CHECK(merged.resources.disk_bytes == 10ULL << 30);
    CHECK(merged.viewer == "vnc");
}

TEST_CASE("merge: mounts are appended", "[merge]") {
    ProfileSpec base;
    base.mounts.push_back({"~/a", "/a", false, "profile x (x:1)"});
    ProfileSpec later;
    later.mounts.push_back({"~/b", "/b", true, "profile y (y:1)"});
    auto merged = merge_profile_specs(base, later);
    REQUIRE(merged.mounts.size() == 2);
    CHECK(merged.mounts[1].host_path == "~/b");
}

TEST_CASE("merge: allowedRoots only narrow (intersection by path segment)", "[merge][mount-policy]") {
    ProfileSpec base;
    base.mount_policy.allowed_roots = std::vector<std::string>{"/home/u/work", "/data"};
    ProfileSpec later;
    // a later layer naming a wider root gets the narrower one; a disjoint root disappears
    later.mount_policy.allowed_roots = std::vector<std::string>{"/home/u", "/data/set1", "/srv", "/home/u/wo"};
    auto merged = merge_profile_specs(base, later);
    CHECK(*merged.mount_policy.allowed_roots == std::vector<std::string>{"/home/u/work", "/data/set1"});
    // unset later: the base stays; unset base: the later one applies
    CHECK(*merge_profile_specs(base, ProfileSpec{}).mount_policy.allowed_roots ==
          std::vector<std::string>{"/home/u/work", "/data"});
    CHECK(*merge_profile_specs(ProfileSpec{}, later).mount_policy.allowed_roots == *later.mount_policy.allowed_roots);
    // nothing in common: nothing may be mounted
    ProfileSpec disjoint;
    disjoint.mount_policy.allowed_roots = std::vector<std::string>{"/elsewhere"};
    auto none = merge_profile_specs(base, disjoint);
    REQUIRE(none.mount_policy.allowed_roots.has_value());
    CHECK(none.mount_policy.allowed_roots->empty());
    ProfileSpec all;
    all.mount_policy.allowed_roots = std::vector<std::string>{"/"};
    CHECK(*merge_profile_specs(base, all).mount_policy.allowed_roots ==
          std::vector<std::string>{"/home/u/work", "/data"});
}

TEST_CASE("merge: denyPaths union, allowHome false wins, createMissing ORed", "[merge][mount-policy]") {
    ProfileSpec base;
    base.mount_policy.deny_paths = {"/a"};
    base.mount_policy.allow_home = false;
    base.mount_policy.create_missing = true;
    ProfileSpec later;
    later.mount_policy.deny_paths = {"/b", "/a"};
    later.mount_policy.allow_home = true;
    later.mount_policy.create_missing = false;
    auto merged = merge_profile_specs(base, later);
    CHECK(merged.mount_policy.deny_paths == std::vector<std::string>{"/a", "/b"});
    CHECK(merged.mount_policy.allow_home == false);
    CHECK(merged.mount_policy.create_missing == true);
    // allowHome: an explicit false in a later layer wins too; true only when nobody said false
    ProfileSpec yes;
    yes.mount_policy.allow_home = true;
    ProfileSpec no;
    no.mount_policy.allow_home = false;
    CHECK(merge_profile_specs(yes, no).mount_policy.allow_home == false);
    CHECK(merge_profile_specs(ProfileSpec{}, yes).mount_policy.allow_home == true);
    CHECK(merge_profile_specs(yes, ProfileSpec{}).mount_policy.allow_home == true);
    CHECK(merge_profile_specs(ProfileSpec{}, later).mount_policy.create_missing == false);
}

TEST_CASE("merge: isolation is container only if asked, and an explicit vm stays", "[merge]") {
    ProfileSpec vm;
    vm.isolation = Isolation::Vm;
    vm.isolation_origin = "profile org (o:3)";
    ProfileSpec container;
    container.isolation = Isolation::Container;
    container.isolation_origin = "profile mine (m:4)";
    auto a = merge_profile_specs(vm, container);
    CHECK(a.isolation == Isolation::Vm);
    CHECK(a.isolation_origin == "profile org (o:3)");
    auto b = merge_profile_specs(container, vm);
    CHECK(b.isolation == Isolation::Vm);
    CHECK(b.isolation_origin == "profile org (o:3)");
    auto c = merge_profile_specs(ProfileSpec{}, container);
    CHECK(c.isolation == Isolation::Container);
    CHECK(c.isolation_origin == "profile mine (m:4)");
    CHECK_FALSE(merge_profile_specs(ProfileSpec{}, ProfileSpec{}).isolation.has_value());
}

TEST_CASE("merge: the process limit only tightens", "[merge]") {
    ProfileSpec base;
    base.resources.processes = 2048;
    ProfileSpec later;
    later.resources.processes = 4096;
    CHECK(merge_profile_specs(base, later).resources.processes == 2048);
    later.resources.processes = 100;
    CHECK(merge_profile_specs(base, later).resources.processes == 100);
    later.resources.processes = 0;  // unset: keeps the base
    CHECK(merge_profile_specs(base, later).resources.processes == 2048);
    CHECK(merge_profile_specs(ProfileSpec{}, base).resources.processes == 2048);
}

TEST_CASE("merge: secret bindings and forbids add up; a later layer cannot drop a forbid", "[merge][secret]") {
    ProfileSpec org;
    org.secret_forbids.push_back({"github", "gist.github.com", "profile org (/o/org.yaml:12)"});
    org.secrets.push_back({"github", "", {}, "profile org (/o/org.yaml:5)"});
    ProfileSpec mine;
    mine.secrets.push_back(
        {"internal", "TOKEN", {{"api.example.test", "authorization"}}, "profile mine (/u/m.yaml:4)"});
    auto merged = merge_profile_specs(org, mine);
    REQUIRE(merged.secrets.size() == 2);
    CHECK(merged.secrets[0].name == "github");
    CHECK(merged.secrets[1].name == "internal");
    REQUIRE(merged.secret_forbids.size() == 1);
    CHECK(merged.secret_forbids[0].origin == "profile org (/o/org.yaml:12)");
    // Whatever comes later, the forbid stays.
    CHECK(merge_profile_specs(merge_profile_specs(ProfileSpec{}, org), ProfileSpec{}).secret_forbids.size() == 1);
}
