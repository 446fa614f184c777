// The REST client layers: envelope parsing (samples as Incus 6.0.4 answered
// them on this kind of machine), error hints, the preview client's lines, the
// socket search order, and the Beast transport over a real unix socket.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "agentctl/error.hpp"
#include "provider/incus/client/api.hpp"
#include "provider/incus/client/client.hpp"

using namespace agentctl::provider::incus;

namespace {

constexpr const char* k_async_exec =
    R"({"type":"async","status":"Operation created","status_code":100,"operation":"/1.0/operations/7459ec5c-fc82-4e54-9fa9-d7de8c486631","error_code":0,"error":"","metadata":{"id":"7459ec5c-fc82-4e54-9fa9-d7de8c486631","class":"task","status":"Running","status_code":103}})";
constexpr const char* k_error_404 =
    R"({"type":"error","status":"","status_code":0,"operation":"","error_code":404,"error":"Instance not found","metadata":null})";

// A one-shot HTTP server on a unix socket: records the request, sends `reply`.
class OneShotServer {
public:
    OneShotServer(std::string path, std::string reply) : m_path(std::move(path)) {
        m_fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", m_path.c_str());
        ::unlink(m_path.c_str());
        REQUIRE(::bind(m_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        REQUIRE(::listen(m_fd, 1) == 0);
        m_thread = std::thread([this, reply = std::move(reply)] {
            const int client = ::accept(m_fd, nullptr, nullptr);
            if (client < 0) return;
            char buffer[8192];
            std::string request;
            // Read headers, then Content-Length bytes of body.
            while (request.find("\r\n\r\n") == std::string::npos) {
                auto n = ::read(client, buffer, sizeof buffer);
                if (n <= 0) break;
                request.append(buffer, static_cast<std::size_t>(n));
            }
            auto pos = request.find("Content-Length: ");
            std::size_t length = pos == std::string::npos ? 0 : std::stoul(request.substr(pos + 16));
            while (request.size() < request.find("\r\n\r\n") + 4 + length) {
                auto n = ::read(client, buffer, sizeof buffer);
                if (n <= 0) break;
                request.append(buffer, static_cast<std::size_t>(n));
            }
            m_request = request;
            auto response =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(reply.size()) +
                "\r\n\r\n" + reply;
            (void)::write(client, response.data(), response.size());
            ::close(client);
        });
    }
    ~OneShotServer() {
        if (m_thread.joinable()) m_thread.join();
        ::close(m_fd);
        ::unlink(m_path.c_str());
    }
    std::string request() {
        if (m_thread.joinable()) m_thread.join();
        return m_request;
    }

private:
    std::string m_path;
    int m_fd = -1;
    std::thread m_thread;
    std::string m_request;
};

}  // namespace

TEST_CASE("envelopes: sync, async, error", "[client]") {
    auto async = parse_envelope(k_async_exec, 202);
    CHECK(async.type == ResponseType::Async);
    CHECK(async.operation == "/1.0/operations/7459ec5c-fc82-4e54-9fa9-d7de8c486631");
    CHECK(async.metadata["status"] == "Running");
    auto error = parse_envelope(k_error_404, 404);
    CHECK(error.type == ResponseType::Error);
    CHECK(error.error_code == 404);
    CHECK(error.error == "Instance not found");
    CHECK_THROWS_WITH(parse_envelope("<html>", 502), Catch::Contains("not an API envelope"));
}

TEST_CASE("Incus errors get hints that say what to do", "[client]") {
    CHECK_THAT(hint_for_incus_error("Failed to start: vhost_vsock kernel module not loaded", 400),
               Catch::Contains("--isolation container"));
    CHECK_THAT(hint_for_incus_error("Error: Failed to receive fd from listener process", 400), Catch::Contains("port"));
    CHECK_THAT(hint_for_incus_error("Instance not found", 404), Catch::Contains("agentctl list"));
    CHECK(hint_for_incus_error("something else", 500).empty());
}

TEST_CASE("the preview client prints runnable incus query lines and sends nothing", "[client]") {
    std::ostringstream out;
    auto client = make_preview_client(out);
    Json body{{"name", "it's"}, {"type", "bridge"}};
    auto post = client->query("POST", "/1.0/networks", &body);
    CHECK(post.type == ResponseType::Async);
    CHECK(client->wait(post.operation, 10).is_object());
    auto get = client->query("GET", "/1.0/instances/tbox?recursion=1");
    CHECK(get.metadata.is_null());
    CHECK(out.str() ==
          "incus query -X POST --data '{\"name\":\"it'\\''s\",\"type\":\"bridge\"}' /1.0/networks\n"
          "incus query -X GET '/1.0/instances/tbox?recursion=1'\n");
    CHECK(client->preview());
}

TEST_CASE("the socket is found the way the incus client finds it", "[client]") {
    std::map<std::string, std::string> env{{"INCUS_SOCKET", "/tmp/x.socket"}, {"INCUS_DIR", "/srv/incus"}};
    CHECK(find_socket(&env).path == "/tmp/x.socket");
    env.erase("INCUS_SOCKET");
    CHECK(find_socket(&env).path == "/srv/incus/unix.socket");
    env.clear();
    auto fallback = find_socket(&env);
    CHECK((fallback.path == "/run/incus/unix.socket" || fallback.path == "/var/lib/incus/unix.socket" ||
           fallback.path.ends_with(".user")));
}

TEST_CASE("the real client speaks HTTP over a unix socket and parses the answer", "[client]") {
    const auto path = (std::filesystem::temp_directory_path() / ("agc-client-" + std::to_string(::getpid()))).string();
    OneShotServer server(path, k_async_exec);
    auto client = make_client(make_unix_transport(path, 5), "user-1000");
    Json body{{"command", {"true"}}};
    auto response = client->query("POST", "/1.0/instances/c2/exec", &body);
    CHECK(response.type == ResponseType::Async);
    auto request = server.request();
    CHECK_THAT(request, Catch::StartsWith("POST /1.0/instances/c2/exec?project=user-1000 HTTP/1.1\r\n"));
    CHECK_THAT(request, Catch::Contains("Content-Type: application/json"));
    CHECK_THAT(request, Catch::EndsWith(R"({"command":["true"]})"));
}

TEST_CASE("an error envelope becomes NotFound or Error with Incus's text", "[client]") {
    const auto path =
        (std::filesystem::temp_directory_path() / ("agc-client-e-" + std::to_string(::getpid()))).string();
    {
        OneShotServer server(path, k_error_404);
        auto client = make_client(make_unix_transport(path, 5));
        CHECK_THROWS_AS(client->query("GET", "/1.0/instances/nope"), NotFound);
    }
    {
        OneShotServer server(path,
                             R"({"type":"error","error_code":400,"error":"vhost_vsock kernel module not loaded"})");
        auto client = make_client(make_unix_transport(path, 5));
        try {
            client->query("POST", "/1.0/instances");
            FAIL("no error");
        } catch (const agentctl::Error& e) {
            CHECK_THAT(e.what(), Catch::Contains("POST /1.0/instances") && Catch::Contains("vhost_vsock"));
            CHECK_THAT(e.hint(), Catch::Contains("--isolation container"));
        }
    }
}

TEST_CASE("an Incus refusal carries its code, and whether waiting can cure it", "[client]") {
    const auto path =
        (std::filesystem::temp_directory_path() / ("agc-client-r-" + std::to_string(::getpid()))).string();
    {
        OneShotServer server(path, R"({"type":"error","error_code":400,"error":"The network is currently in use"})");
        auto client = make_client(make_unix_transport(path, 5));
        try {
            client->query("DELETE", "/1.0/networks/agc-x");
            FAIL("no error");
        } catch (const IncusError& e) {
            CHECK(e.status() == 400);
            CHECK(e.refusal() == IncusRefusal::InUse);
            CHECK(e.transient());
        }
    }
    {
        OneShotServer server(path, R"({"type":"error","error_code":400,"error":"Invalid config: Unknown key"})");
        auto client = make_client(make_unix_transport(path, 5));
        try {
            client->query("PUT", "/1.0/instances/x");
            FAIL("no error");
        } catch (const IncusError& e) {
            CHECK(e.status() == 400);
            CHECK_FALSE(e.transient());
        }
    }
    {
        OneShotServer server(path, k_error_404);
        auto client = make_client(make_unix_transport(path, 5));
        try {
            client->query("GET", "/1.0/instances/nope");
            FAIL("no error");
        } catch (const NotFound& e) {
            CHECK(e.status() == 404);
            CHECK_FALSE(e.transient());
        }
    }
    CHECK(classify_refusal("Failed deleting instance \"c\": Instance is busy running a \"create\" operation") ==
          IncusRefusal::Busy);
    CHECK(classify_refusal("Cannot delete an ACL that is in use") == IncusRefusal::InUse);
    CHECK(classify_refusal("Instance not found") == IncusRefusal::Other);
    CHECK(classify_refusal("Instance is running") == IncusRefusal::Running);
    // Incus 6.0.4's bridge set-up and tear-down, when another interface on the
    // host went away while it listed them (as measured with parallel deletes).
    CHECK(classify_refusal("Failed to delete bridge children interfaces: Failed to run: ip -d -j link show "
                           "agc-5f1c2a9e0b: exit status 1 (Device \"agc-5f1c2a9e0b\" does not exist.)") ==
          IncusRefusal::InterfaceGone);
    CHECK(classify_refusal("Network interface \"agc-x\" already exists") == IncusRefusal::Other);
}

TEST_CASE("a wait that outlasts its timeout is an operation still running, not a failure", "[client]") {
    // Incus 6.0.4 answers GET /1.0/operations/ID/wait?timeout=N this way when
    // the operation (an agent's installer, say) runs longer than N seconds.
    const auto path =
        (std::filesystem::temp_directory_path() / ("agc-client-w-" + std::to_string(::getpid()))).string();
    {
        OneShotServer server(path, R"({"type":"error","status":"","status_code":0,"operation":"",)"
                                   R"("error_code":500,"error":"context deadline exceeded","metadata":null})");
        auto client = make_client(make_unix_transport(path, 5), "p");
        const auto op = client->wait("/1.0/operations/7459ec5c", 30);
        CHECK(op.value("status", "") == "Running");
        CHECK_THAT(server.request(),
                   Catch::StartsWith("GET /1.0/operations/7459ec5c/wait?timeout=30&project=p HTTP/1.1\r\n"));
    }
    {
        OneShotServer server(path, R"({"type":"error","error_code":500,"error":"Operation cancelled"})");
        auto client = make_client(make_unix_transport(path, 5));
        CHECK_THROWS_WITH(client->wait("/1.0/operations/7459ec5c", 30), Catch::Contains("Operation cancelled"));
    }
}

TEST_CASE("a transient refusal is asked again with a bounded backoff; any other error at once", "[client]") {
    int calls = 0;
    retry_transient(
        [&] {
            if (++calls < 3) throw IncusError("gone", "", 500, IncusRefusal::InterfaceGone);
        },
        std::chrono::seconds(30));
    CHECK(calls == 3);

    calls = 0;
    CHECK_THROWS_AS(retry_transient(
                        [&] {
                            ++calls;
                            throw IncusError("Instance is running", "", 400);
                        },
                        std::chrono::seconds(30)),
                    IncusError);
    CHECK(calls == 1);

    calls = 0;
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(retry_transient(
                        [&] {
                            ++calls;
                            throw IncusError("busy", "", 400, IncusRefusal::Busy);
                        },
                        std::chrono::milliseconds(700)),
                    IncusError);
    CHECK(calls >= 2);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(700));
}

TEST_CASE("no daemon: the error names the socket and how to start one", "[client]") {
    auto client = make_client(make_unix_transport("/nonexistent/agentctl/unix.socket", 2));
    try {
        client->query("GET", "/1.0");
        FAIL("no error");
    } catch (const agentctl::Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("/nonexistent/agentctl/unix.socket"));
        CHECK_THAT(e.hint(), Catch::Contains("up.sh"));
    }
}

TEST_CASE("incus client: the status of an instance or operation is read in one place", "[incus][client]") {
    CHECK(incus_status_named("Running") == IncusStatus::Running);
    CHECK(incus_status_named("running") == IncusStatus::Other);  // Incus's names are exact
    CHECK(operation_in_progress(Json{{"status", "Pending"}}));
    CHECK(operation_in_progress(Json{{"status", "Running"}}));
    CHECK_FALSE(operation_in_progress(Json{{"status", "Success"}}));
    CHECK(incus_status(Json{{"status", "Frozen"}}) == IncusStatus::Frozen);
    CHECK(incus_status(Json{{"status", "Cancelled"}}) == IncusStatus::Cancelled);
    CHECK(incus_status(Json{{"status", 103}}) == IncusStatus::Other);
    CHECK(incus_status(Json::object()) == IncusStatus::Other);
    CHECK(incus_status(Json::array()) == IncusStatus::Other);
}
