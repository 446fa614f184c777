// Credential injection with real sockets and real TLS: a test HTTPS origin in
// the suite's namespace (its own test CA), the proxy run as `agentctl
// egress-proxy` with its secrets on a pipe, and a client that trusts only the
// sandbox's CA, as a sandbox does.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "core/files.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "egress_proxy/sandbox_ca.hpp"
#include "egress_proxy/secret_injection.hpp"
#include "egress_proxy/secret_rotation.hpp"
#include "suite_support.hpp"
#include "support/build_paths.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace ep = agentctl::egress_proxy;

namespace {

// A log request that prints JSON Lines (`json`), following with `follow`.
[[maybe_unused]] agentctl::LogRequest json_lines(bool json = true, bool follow = false) {
    agentctl::LogRequest request;
    request.json = json;
    request.follow = follow;
    return request;
}

constexpr const char* k_value = "ghp_realValue0123456789abcdef";
constexpr const char* k_placeholder = "agentctl-secret-placeholder-6b1f0c2d9e8a7f3b";
// A second secret, bound to npm.test: that host is terminated too.
constexpr const char* k_npm_placeholder = "agentctl-secret-placeholder-0a9b8c7d6e5f4a3b";

// The test origin's CA and its certificate for api.test, other.test and npm.test, made with the openssl tool.
struct OriginCertificates {
    explicit OriginCertificates(const fs::path& dir)
        : ca(dir / "origin-ca.crt"), cert(dir / "origin.crt"), key(dir / "origin.key") {
        const auto d = dir.string();
        suite::must("cd " + d +
                    " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout origin-ca.key"
                    " -out origin-ca.crt -subj /CN=agentctl-test-origin-ca -days 2"
                    " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null");
        agentctl::core::write_file_atomic(dir / "origin.ext",
                                          "subjectAltName=DNS:api.test,DNS:other.test,DNS:npm.test\n"
                                          "authorityKeyIdentifier=keyid\n");
        suite::must("cd " + d +
                    " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout origin.key -out "
                    "origin.csr -subj /CN=api.test 2>/dev/null && openssl x509 -req -in origin.csr -CA origin-ca.crt "
                    "-CAkey origin-ca.key -CAcreateserial -out origin.crt -days 2 -extfile origin.ext 2>/dev/null");
    }
    fs::path ca, cert, key;
};

// The origin at 192.0.3.2:443 in the suite's namespace.
struct Origin {
    Origin(const suite::Network& network, const OriginCertificates& certificates)
        : child({"ip", "netns", "exec", network.name, suite::tls_origin_bin(), "192.0.3.2:443",
                 certificates.cert.string(), certificates.key.string()}) {
        if (child.wait_for_line("listening", 10s).empty()) throw std::runtime_error("the TLS origin did not start");
    }
    suite::Child child;
};

// A TLS client over a CONNECT tunnel through the proxy; trusts only `ca_file`.
class TlsClient {
public:
    TlsClient(std::uint16_t proxy_port, const std::string& host, const fs::path& ca_file) : m_tcp(proxy_port) {
        m_context = SSL_CTX_new(TLS_client_method());
        SSL_CTX_load_verify_locations(m_context, ca_file.c_str(), nullptr);
        SSL_CTX_set_verify(m_context, SSL_VERIFY_PEER, nullptr);
        connect_status = suite::connect_through(m_tcp, host + ":443").status;
        if (connect_status != 200) return;
        m_ssl = SSL_new(m_context);
        SSL_set_fd(m_ssl, m_tcp.fd());
        SSL_set_tlsext_host_name(m_ssl, host.c_str());
        SSL_set1_host(m_ssl, host.c_str());
        handshake_ok = SSL_connect(m_ssl) == 1;
        if (!handshake_ok) verify_result = SSL_get_verify_result(m_ssl);
    }
    ~TlsClient() {
        if (m_ssl != nullptr) SSL_free(m_ssl);
        SSL_CTX_free(m_context);
    }
    TlsClient(const TlsClient&) = delete;
    TlsClient& operator=(const TlsClient&) = delete;

    // Sends a GET with `headers` (each ending in CRLF); returns the whole response ("" when the connection closed).
    std::string get(const std::string& target, const std::string& headers) {
        return send("GET " + target + " HTTP/1.1\r\nHost: api.test\r\n" + headers + "\r\n") ? read_response() : "";
    }
    // Sends `bytes` as they are; false when the connection is gone.
    bool send(const std::string& bytes) { return SSL_write(m_ssl, bytes.data(), static_cast<int>(bytes.size())) > 0; }
    // The next response, head and Content-Length body (what arrived when the connection closed).
    std::string read_response() {
        std::string response;
        for (;;) {
            const auto end = m_pending.find("\r\n\r\n");
            if (end != std::string::npos) {
                const auto at = m_pending.find("Content-Length: ");
                const std::size_t length =
                    at == std::string::npos || at > end ? 0 : std::stoul(m_pending.substr(at + 16));
                if (m_pending.size() >= end + 4 + length) {
                    response = m_pending.substr(0, end + 4 + length);
                    m_pending.erase(0, end + 4 + length);
                    return response;
                }
            }
            char chunk[16384];
            const int n = SSL_read(m_ssl, chunk, sizeof chunk);
            if (n <= 0) return std::exchange(m_pending, {});
            m_pending.append(chunk, static_cast<std::size_t>(n));
        }
    }

    int connect_status = 0;
    bool handshake_ok = false;
    long verify_result = X509_V_OK;

private:
    suite::Client m_tcp;
    SSL_CTX* m_context = nullptr;
    SSL* m_ssl = nullptr;
    std::string m_pending;  // read beyond the last response
};

struct Fixture {
    suite::Network network;
    suite::ProxyFiles files;
    OriginCertificates certificates{files.dir};
    Origin origin{network, certificates};
    fs::path sandbox_ca = files.dir / "sandbox-ca.crt";
    std::optional<suite::Proxy> proxy;

    // `trust_origin`: the proxy trusts the test origin's CA (--upstream-ca), as a test setting.
    fs::path secrets_socket = files.dir / "secrets.sock";

    // The payload agentctl writes at start, and again (with the new value) on `secret set`.
    [[nodiscard]] std::string payload_with(const std::string& value) const {
        return ep::secret_payload_json(
            {ca.cert,
             ca.key,
             {{"github", k_placeholder, value, {{"api.test", "authorization"}}},
              {"npm", k_npm_placeholder, "npm_realValue", {{"npm.test", "authorization"}}}}});
    }

    ep::CaPem ca = ep::make_sandbox_ca("secrets-test");

    explicit Fixture(bool trust_origin = true) {
        files.write_policy(suite::policy_allowing({"api.test:443", "other.test:443", "npm.test:443", "web.test:80"}));
        files.write_resolve("192.0.3.2 api.test other.test npm.test web.test\n");
        agentctl::core::write_file_atomic(sandbox_ca, ca.cert, 0644);
        int fds[2];
        REQUIRE(::pipe(fds) == 0);
        const auto text = payload_with(k_value);
        REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
        ::close(fds[1]);
        std::vector<std::string> flags{"--sandbox",        "secrets-test",
                                       "--secrets-fd",     std::to_string(fds[0]),
                                       "--secrets-socket", secrets_socket.string()};
        if (trust_origin) flags.insert(flags.end(), {"--upstream-ca", certificates.ca.string()});
        proxy.emplace(files, flags, agentctl::test::agentctl_binary());
        ::close(fds[0]);
    }

    // The log once the proxy has stopped (SIGTERM writes every queued line).
    [[nodiscard]] std::string log_text() {
        proxy->process().signal(SIGTERM);
        REQUIRE(proxy->process().wait_exit(5s) == 0);
        // Every kept file (the refusals are in one of their own).
        std::ostringstream merged;
        agentctl::egress_proxy::print_network_log(files.log.string(), json_lines(), merged);
        return merged.str();
    }

    // The log once the proxy has stopped holds each of `parts`, and never the secret's value.
    void check_log(std::initializer_list<std::string_view> parts) {
        const auto log = log_text();
        for (const auto part : parts) {
            INFO(part);
            CHECK(log.find(part) != std::string::npos);
        }
        CHECK(log.find(k_value) == std::string::npos);
    }
};

}  // namespace

TEST_CASE("secrets: the bound host receives the real value in place of the placeholder", "[egress][secrets]") {
    SUITE_REQUIRE_READY();
    Fixture fixture;
    TlsClient client(fixture.proxy->port, "api.test", fixture.sandbox_ca);
    REQUIRE(client.connect_status == 200);
    REQUIRE(client.handshake_ok);  // the sandbox trusts only its CA: the proxy presented a certificate of it

    auto bearer = client.get("/user", std::string("Authorization: Bearer ") + k_placeholder + "\r\n");
    CHECK(bearer.rfind("HTTP/1.1 200", 0) == 0);
    CHECK(bearer.find(std::string("Authorization: Bearer ") + k_value) != std::string::npos);
    CHECK(bearer.find(k_placeholder) == std::string::npos);

    // git's form, on the same connection (keep-alive): Basic credentials with the token as password.
    auto basic = client.get(
        "/org/repo.git/info/refs?service=git-upload-pack",
        "Authorization: Basic " + ep::encode_base64(std::string("x-access-token:") + k_placeholder) + "\r\n");
    CHECK(basic.find("Basic " + ep::encode_base64(std::string("x-access-token:") + k_value)) != std::string::npos);

    // Without a placeholder the request goes out untouched.
    auto plain = client.get("/", "Authorization: Bearer something-else\r\n");
    CHECK(plain.find("Authorization: Bearer something-else") != std::string::npos);

    // The value is in neither the proxy's arguments nor its environment, nor its log.
    const auto proc = "/proc/" + std::to_string(fixture.proxy->process().pid());
    CHECK(agentctl::core::read_file(proc + "/cmdline").find(k_value) == std::string::npos);
    CHECK(agentctl::core::read_file(proc + "/environ").find(k_value) == std::string::npos);
    fixture.check_log({"\"secrets\":\"github\"", "\"terminated\":true"});
}

TEST_CASE("secrets: a placeholder where its secret does not go is refused and logged", "[egress][secrets]") {
    SUITE_REQUIRE_READY();
    Fixture fixture;
    {
        TlsClient client(fixture.proxy->port, "api.test", fixture.sandbox_ca);
        REQUIRE(client.handshake_ok);
        auto other_header = client.get("/", std::string("X-Leak: ") + k_placeholder + "\r\n");
        CHECK(other_header.rfind("HTTP/1.1 403", 0) == 0);
        CHECK(other_header.find("X-Agentctl-Reason: secret-misplaced") != std::string::npos);
        CHECK(other_header.find("secret github may not go to api.test (header x-leak)") != std::string::npos);
        CHECK(other_header.find(k_value) == std::string::npos);
    }
    {
        TlsClient client(fixture.proxy->port, "api.test", fixture.sandbox_ca);
        REQUIRE(client.handshake_ok);
        auto in_url = client.get(std::string("/?token=") + k_placeholder, "");
        INFO(in_url);
        CHECK(in_url.rfind("HTTP/1.1 403", 0) == 0);
        CHECK(in_url.find("(the URL)") != std::string::npos);
    }
    // Plain HTTP never carries a secret: a placeholder there is refused too.
    suite::Client plain(fixture.proxy->port);
    plain.send(std::string("GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer ") +
               k_placeholder + "\r\n\r\n");
    CHECK(plain.read_response().status == 403);
    fixture.check_log({"\"reason\":\"secret-misplaced\"", "\"secret\":\"github\""});
}

TEST_CASE("secrets: a host without a binding stays an opaque tunnel", "[egress][secrets]") {
    SUITE_REQUIRE_READY();
    Fixture fixture;
    // A client that trusts only the sandbox CA cannot talk to other.test: the
    // proxy never presents a sandbox certificate for it.
    TlsClient sandbox_only(fixture.proxy->port, "other.test", fixture.sandbox_ca);
    REQUIRE(sandbox_only.connect_status == 200);
    CHECK_FALSE(sandbox_only.handshake_ok);
    CHECK(sandbox_only.verify_result == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    // Through the tunnel, the origin itself answers, and the placeholder arrives as sent.
    TlsClient direct(fixture.proxy->port, "other.test", fixture.certificates.ca);
    REQUIRE(direct.handshake_ok);
    auto response = direct.get("/", std::string("Authorization: Bearer ") + k_placeholder + "\r\n");
    CHECK(response.find(std::string("Authorization: Bearer ") + k_placeholder) != std::string::npos);
    CHECK(response.find(k_value) == std::string::npos);
}

TEST_CASE("secrets: no secret goes to a bound host whose certificate does not verify", "[egress][secrets]") {
    SUITE_REQUIRE_READY();
    Fixture fixture(/*trust_origin=*/false);
    TlsClient client(fixture.proxy->port, "api.test", fixture.sandbox_ca);
    REQUIRE(client.handshake_ok);
    auto response = client.get("/", std::string("Authorization: Bearer ") + k_placeholder + "\r\n");
    CHECK(response.rfind("HTTP/1.1 502", 0) == 0);
    CHECK(response.find("X-Agentctl-Reason: upstream-untrusted") != std::string::npos);
    CHECK(fixture.log_text().find("\"reason\":\"upstream-untrusted\"") != std::string::npos);
}

TEST_CASE("secrets: a new value reaches the running proxy on its socket, from root only", "[egress][secrets]") {
    SUITE_REQUIRE_READY();
    Fixture fixture;
    constexpr const char* k_new = "ghp_rotatedValue9876543210fedcba";
    const auto bearer = std::string("Authorization: Bearer ") + k_placeholder + "\r\n";
    TlsClient before(fixture.proxy->port, "api.test", fixture.sandbox_ca);
    REQUIRE(before.handshake_ok);
    CHECK(before.get("/", bearer).find(std::string("Bearer ") + k_value) != std::string::npos);

    // Another user cannot hand the proxy a value (the socket is 0600 and the proxy checks the peer is root).
    const pid_t child = ::fork();
    if (child == 0) {
        int code = 0;
        if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(3);
        try {
            (void)ep::send_secret_rotation(fixture.secrets_socket.string(), fixture.payload_with("forged"));
            code = 1;
        } catch (...) {
            code = 0;
        }
        ::_exit(code);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));

    CHECK(ep::send_secret_rotation(fixture.secrets_socket.string(), fixture.payload_with(k_new)) == "rotated github");
    // A new connection, no restart: the same proxy process injects the new value.
    TlsClient after(fixture.proxy->port, "api.test", fixture.sandbox_ca);
    REQUIRE(after.handshake_ok);
    const auto response = after.get("/", bearer);
    CHECK(response.find(std::string("Bearer ") + k_new) != std::string::npos);
    CHECK(response.find(k_value) == std::string::npos);
    // Not by argument, environment or file: the proxy's /proc and the proxy's files hold no value.
    const auto proc = "/proc/" + std::to_string(fixture.proxy->process().pid());
    CHECK(agentctl::core::read_file(proc + "/cmdline").find(k_new) == std::string::npos);
    CHECK(agentctl::core::read_file(proc + "/environ").find(k_new) == std::string::npos);
    for (const auto& entry : fs::recursive_directory_iterator(fixture.files.dir)) {
        if (!entry.is_regular_file()) continue;
        INFO(entry.path());
        CHECK(agentctl::core::read_file(entry.path()).find(k_new) == std::string::npos);
    }
    fixture.check_log({"\"event\":\"secrets\"", "\"decision\":\"rotated\""});
}

TEST_CASE(
    "secrets: a placeholder in the start of a body is refused where its secret does not go, and goes out as it "
    "is to its own host",
    "[egress][secrets]") {
    SUITE_REQUIRE_READY();
    Fixture fixture;
    const auto post = [](const std::string& host, const std::string& body) {
        return "POST /upload HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\n\r\n" + body;
    };
    // The response to `request` on `client`, a TLS connection to `host`.
    const auto exchange = [](TlsClient& client, const std::string& request) {
        REQUIRE(client.handshake_ok);
        REQUIRE(client.send(request));
        return client.read_response();
    };
    const auto json_body = std::string(R"({"name":"x","token":")") + k_placeholder + R"("})";
    {
        // npm.test is terminated (npm is bound to it), github is not bound there.
        TlsClient client(fixture.proxy->port, "npm.test", fixture.sandbox_ca);
        const auto response = exchange(client, post("npm.test", json_body));
        INFO(response);
        CHECK(response.rfind("HTTP/1.1 403", 0) == 0);
        CHECK(response.find("X-Agentctl-Reason: secret-misplaced") != std::string::npos);
        CHECK(response.find("secret github may not go to npm.test (the body)") != std::string::npos);
        CHECK(response.find("body-bytes") == std::string::npos);  // the origin never saw the request
    }
    {
        // A client that waits for 100 Continue gets it from the proxy; a chunked
        // body is searched as decoded, across its chunks, beyond the first read.
        TlsClient client(fixture.proxy->port, "npm.test", fixture.sandbox_ca);
        CHECK(exchange(client,
                       "POST /upload HTTP/1.1\r\nHost: npm.test\r\nExpect: 100-continue\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n")
                  .rfind("HTTP/1.1 100 Continue", 0) == 0);
        const std::string head(k_placeholder, 20);
        const std::string tail(k_placeholder + 20);
        const std::string padding(3000, 'a');
        REQUIRE(client.send(fmt::format("{:x}\r\n{}\r\n", padding.size(), padding)));
        REQUIRE(client.send(fmt::format("{:x}\r\n{}\r\n", head.size(), head)));
        const auto response = exchange(client, fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", tail.size(), tail));
        INFO(response);
        CHECK(response.rfind("HTTP/1.1 403", 0) == 0);
        CHECK(response.find("secret github may not go to npm.test (the body)") != std::string::npos);
    }
    {
        // To its own host a placeholder in the body goes out as it is: the value never goes into a body.
        TlsClient client(fixture.proxy->port, "api.test", fixture.sandbox_ca);
        const auto response = exchange(client, post("api.test", json_body));
        INFO(response);
        CHECK(response.rfind("HTTP/1.1 200", 0) == 0);
        CHECK(response.find(json_body) != std::string::npos);
        CHECK(response.find(k_value) == std::string::npos);
        // And the connection goes on (keep-alive) with a body that carries none.
        CHECK(exchange(client, post("api.test", "plain")).find("body-bytes: 5\nplain") != std::string::npos);
    }
    // Plain HTTP never carries a secret, body included; a body without one goes through.
    suite::Client plain(fixture.proxy->port);
    plain.send("POST http://web.test/a HTTP/1.1\r\nHost: web.test\r\nContent-Length: 4\r\n\r\nabcd");
    CHECK(plain.read_response().body.find("method=POST target=/a host=web.test body=4") != std::string::npos);
    plain.send("POST http://web.test/b HTTP/1.1\r\nHost: web.test\r\nContent-Length: " +
               std::to_string(json_body.size()) + "\r\n\r\n" + json_body);
    const auto refused = plain.read_response();
    CHECK(refused.status == 403);
    CHECK(refused.body.find("over plain HTTP (the body)") != std::string::npos);
    fixture.check_log({"\"reason\":\"secret-misplaced\"", "\"secret\":\"github\"", "\"host\":\"npm.test\""});
}
