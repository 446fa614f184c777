// `agentctl cp` arguments: which side is the sandbox, as docker cp reads them.
#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "cli/cp_args.hpp"

using namespace agentctl;
using namespace agentctl::cli;

TEST_CASE("cp: NAME:PATH is the sandbox side, either way round", "[cp]") {
    auto pull = parse_copy_args("work:/workspace/out.txt", "./out.txt");
    CHECK_FALSE(pull.to_sandbox);
    CHECK(pull.sandbox == "work");
    CHECK(pull.guest_path == "/workspace/out.txt");
    CHECK(pull.host_path == "./out.txt");
    auto push = parse_copy_args("src", "work:/workspace");
    CHECK(push.to_sandbox);
    CHECK(push.sandbox == "work");
    CHECK(push.guest_path == "/workspace");
    CHECK(push.host_path == "src");
    // A path relative to the sandbox user's home.
    CHECK(parse_copy_args("work:notes.md", "/tmp/notes.md").guest_path == "notes.md");
}

TEST_CASE("cp: host paths with a colon, and - for a tar stream", "[cp]") {
    CHECK(parse_copy_args("./a:b", "work:/x").host_path == "./a:b");
    CHECK(parse_copy_args("/tmp/a:b", "work:/x").host_path == "/tmp/a:b");
    CHECK(parse_copy_args("dir/a:b", "work:/x").host_path == "dir/a:b");
    auto stream_in = parse_copy_args("-", "work:/workspace");
    CHECK(stream_in.to_sandbox);
    CHECK(stream_in.host_path == "-");
    auto stream_out = parse_copy_args("work:/workspace", "-");
    CHECK_FALSE(stream_out.to_sandbox);
    CHECK(stream_out.host_path == "-");
}

TEST_CASE("cp: refusals name the argument and what to write", "[cp]") {
    CHECK_THROWS_WITH(parse_copy_args("a:/x", "b:/y"),
                      "cp a:/x b:/y: both are sandbox paths; agentctl copies between a sandbox and this host");
    CHECK_THROWS_WITH(parse_copy_args("./a", "/b"), "cp ./a /b: neither is a sandbox path (NAME:PATH)");
    CHECK_THROWS_WITH(parse_copy_args("work:", "./x"), "work:: no path in the sandbox after \"work:\"");
    CHECK_THROWS_WITH(parse_copy_args("9lives:/x", "./x"), Catch::Contains("9lives:/x: invalid sandbox name '9lives'"));
    CHECK_THROWS_WITH(parse_copy_args("", "work:/x"), "cp: an empty path");
    try {
        (void)parse_copy_args("./a", "/b");
    } catch (const Error& e) {
        CHECK(e.hint() == "agentctl cp NAME:/path ./local, or agentctl cp ./local NAME:/path");
    }
}
