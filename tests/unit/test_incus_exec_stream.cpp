// The pure parts of exec streaming: the operation's websocket secrets and
// their request targets (Incus client/incus_instances.go, ExecInstance and
// GetOperationWebsocket).
#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "provider/incus/exec_stream.hpp"
#include "provider/incus/payloads.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

TEST_CASE("exec websocket secrets come from the operation's fds", "[exec-stream]") {
    const auto metadata = Json::parse(R"({"fds": {"0": "s0", "1": "s1", "2": "s2", "control": "sc"}})");
    const auto secrets = parse_exec_secrets(metadata);
    CHECK(secrets.in == "s0");
    CHECK(secrets.out == "s1");
    CHECK(secrets.err == "s2");
    CHECK(secrets.control == "sc");
    CHECK_THROWS_WITH(parse_exec_secrets(Json::parse(R"({"fds": {"0": "s0"}})")),
                      Catch::Contains("without a \"control\" stream"));
    CHECK_THROWS_AS(parse_exec_secrets(Json()), Error);
}

TEST_CASE("exec websocket targets name the operation and the secret", "[exec-stream]") {
    CHECK(websocket_target("/1.0/operations/abc-123", "xyz") == "/1.0/operations/abc-123/websocket?secret=xyz");
    CHECK(websocket_target("abc-123", "xyz") == "/1.0/operations/abc-123/websocket?secret=xyz");
}

TEST_CASE("streamed exec payload: websockets, nothing recorded", "[exec-stream]") {
    GuestUser user{"agent", 1500, 1500, "/home/agent", "/bin/bash"};
    auto payload = streamed_exec_payload({"head", "-c", "10"}, {}, &user);
    CHECK(payload["wait-for-websocket"] == true);
    CHECK(payload["record-output"] == false);
    CHECK(payload["interactive"] == false);
    CHECK(payload["user"] == 1500);
}
