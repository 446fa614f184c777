// `agentctl version` asks limactl for Lima's version.
#include <catch2/catch.hpp>

#include "fakes/lima_fixture.hpp"

using lima_test::LimaWorld;

TEST_CASE("the Lima backend reports limactl's version", "[lima][fake]") {
    LimaWorld world;
    auto provider = world.provider();
    CHECK(provider->backend_version() == "Lima 1.0.3");
}
