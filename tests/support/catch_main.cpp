// Catch2's main, with agentctl's diagnostics at the level the binary uses by
// default (warn): tests that want the info lines install their own logger.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

int main(int argc, char* argv[]) {
    spdlog::set_level(spdlog::level::warn);
    return Catch::Session().run(argc, argv);
}
