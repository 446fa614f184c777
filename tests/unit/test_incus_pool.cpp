// The warm pool's template digest: which creates an entry can serve, and that
// an entry serves only creates that would have made it the same.
#include <catch2/catch.hpp>
#include <string>

#include "provider/incus/lifecycle/provider_impl.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

// What `create NAME --isolation container --mount-none` asks for with the
// built-in profile.
SandboxSpec like_an_entry() {
    SandboxSpec spec;
    spec.name = "work";
    spec.isolation = Isolation::Container;
    spec.resources.cpu_cores = 2;
    spec.resources.disk_bytes = 20ULL << 30;
    return spec;
}

std::string digest_of(const SandboxSpec& spec, const std::string& image = "agentctl-debian-12") {
    const auto digest = pool_template_digest(spec, image);
    REQUIRE(digest);
    return *digest;
}

}  // namespace

TEST_CASE("pool: the policy, profiles and name are applied when an entry is taken, not part of it", "[pool]") {
    const auto base = digest_of(like_an_entry());
    CHECK(base.size() == 16);
    auto spec = like_an_entry();
    spec.name = "other";
    spec.profiles = {"default", "strict"};
    policy::AllowRule rule;
    rule.host = "api.github.com";
    rule.ports = {443};
    spec.network.allow.push_back(rule);
    spec.network.deny_lan = false;
    spec.network.allow_lan = true;
    spec.keep_on_failure = true;
    CHECK(digest_of(spec) == base);
    // 0 is the default process limit, said either way.
    spec.resources.processes = k_default_processes;
    CHECK(digest_of(spec) == base);
}

TEST_CASE("pool: what an entry cannot change once it runs makes another digest", "[pool]") {
    const auto base = digest_of(like_an_entry());
    CHECK(digest_of(like_an_entry(), "other-image") != base);
    auto spec = like_an_entry();
    spec.user = "dev";
    CHECK(digest_of(spec) != base);
    spec = like_an_entry();
    spec.resources.cpu_cores = 4;
    CHECK(digest_of(spec) != base);
    spec = like_an_entry();
    spec.resources.memory_bytes = 1ULL << 30;
    CHECK(digest_of(spec) != base);
    spec = like_an_entry();
    spec.resources.disk_bytes = 10ULL << 30;
    CHECK(digest_of(spec) != base);
    spec = like_an_entry();
    spec.resources.processes = 512;
    CHECK(digest_of(spec) != base);
}

TEST_CASE("pool: a create with mounts, ports, packages, an agent, secrets, a target, a VM or no policy is not served",
          "[pool]") {
    const std::string image = "agentctl-debian-12";
    auto spec = like_an_entry();
    spec.mounts.push_back(Mount{"/srv/app", "/workspace", false, "--mount"});
    CHECK_FALSE(pool_template_digest(spec, image));
    spec = like_an_entry();
    spec.ports.push_back(PortForward{});
    CHECK_FALSE(pool_template_digest(spec, image));
    spec = like_an_entry();
    spec.packages = {"git"};
    CHECK_FALSE(pool_template_digest(spec, image));
    spec = like_an_entry();
    spec.agent = "claude";
    CHECK_FALSE(pool_template_digest(spec, image));
    spec = like_an_entry();
    spec.secrets.push_back(SecretUse{});
    CHECK_FALSE(pool_template_digest(spec, image));
    spec = like_an_entry();
    spec.target = "member2";
    CHECK_FALSE(pool_template_digest(spec, image));
    spec = like_an_entry();
    spec.isolation = Isolation::Vm;
    CHECK_FALSE(pool_template_digest(spec, image));
    spec = like_an_entry();
    spec.network.enabled = false;
    CHECK_FALSE(pool_template_digest(spec, image));
}
