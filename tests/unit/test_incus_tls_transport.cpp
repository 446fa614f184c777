// The HTTPS transport against a real TLS server in this process (OpenSSL, on
// 127.0.0.1): the request carries the client certificate; the pinned server
// certificate is enforced byte for byte; an unpinned self-signed server, a
// refused client certificate (403 and `auth: untrusted`, as incusd answers)
// and a closed port are clear errors; websockets' raw streams work over TLS.
#include <utility>  // must precede Asio (std::exchange in awaitable.hpp on g++ 12)

#include <catch2/catch.hpp>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include "agentctl/error.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/client/remote.hpp"
#include "support/error_text.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;
namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;

namespace {

struct Pem {
    std::string cert, key;
};

std::string bio_text(BIO* bio) {
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio, &data);
    return std::string(data, static_cast<std::size_t>(size));
}

// A self-signed P-256 certificate, as `incus remote add` and incusd make them.
Pem make_certificate(const char* common_name) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    REQUIRE(key != nullptr);
    X509* cert = X509_new();
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name), -1, -1,
                               0);
    X509_set_issuer_name(cert, name);
    REQUIRE(X509_sign(cert, key, EVP_sha256()) > 0);
    Pem pem;
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, cert);
    pem.cert = bio_text(bio);
    BIO_free(bio);
    bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
    pem.key = bio_text(bio);
    BIO_free(bio);
    X509_free(cert);
    EVP_PKEY_free(key);
    return pem;
}

// An HTTPS server on 127.0.0.1 that asks for a client certificate and accepts
// any (as incusd does: trust is decided per request). Each connection gets
// the next reply; a websocket upgrade gets a 101 and then an echo.
class TlsServer {
public:
    TlsServer(const Pem& identity, std::vector<std::string> replies)
        : m_context(ssl::context::tls_server),
          m_acceptor(m_io, {asio::ip::make_address("127.0.0.1"), 0}),
          m_replies(std::move(replies)) {
        m_context.use_certificate_chain(asio::buffer(identity.cert));
        m_context.use_private_key(asio::buffer(identity.key), ssl::context::pem);
        m_context.set_verify_mode(ssl::verify_peer);
        m_context.set_verify_callback([](bool, ssl::verify_context&) { return true; });
        m_thread = std::thread([this] { serve(); });
    }
    ~TlsServer() {
        m_stop = true;
        // Wake a blocked accept with a connection of our own.
        boost::system::error_code ec;
        tcp::socket wake(m_io);
        wake.connect(m_acceptor.local_endpoint(), ec);
        m_thread.join();
    }
    [[nodiscard]] std::string port() const { return std::to_string(m_acceptor.local_endpoint().port()); }
    [[nodiscard]] std::vector<std::string> requests() {
        std::lock_guard lock(m_mutex);
        return m_requests;
    }
    [[nodiscard]] int client_certificates() const { return m_client_certs; }

private:
    void serve() {
        for (const auto& reply : m_replies) {
            tcp::socket socket(m_io);
            boost::system::error_code ec;
            m_acceptor.accept(socket, ec);
            if (ec || m_stop) return;
            ssl::stream<tcp::socket> stream(std::move(socket), m_context);
            stream.handshake(ssl::stream_base::server, ec);
            if (ec) continue;  // the client gave up (a refused certificate)
            if (X509* peer = SSL_get_peer_certificate(stream.native_handle())) {
                ++m_client_certs;
                X509_free(peer);
            }
            asio::streambuf buffer;
            asio::read_until(stream, buffer, "\r\n\r\n", ec);
            std::string request(asio::buffers_begin(buffer.data()), asio::buffers_end(buffer.data()));
            {
                std::lock_guard lock(m_mutex);
                m_requests.push_back(request);
            }
            asio::write(stream, asio::buffer(reply), ec);
            if (reply.starts_with("HTTP/1.1 101")) {
                char echo[64];
                const auto n = stream.read_some(asio::buffer(echo), ec);
                if (!ec) asio::write(stream, asio::buffer(echo, n), ec);
            }
            stream.shutdown(ec);
        }
    }

    asio::io_context m_io;
    ssl::context m_context;
    tcp::acceptor m_acceptor;
    std::vector<std::string> m_replies;
    std::vector<std::string> m_requests;
    std::mutex m_mutex;
    std::atomic<int> m_client_certs{0};
    std::atomic<bool> m_stop{false};
    std::thread m_thread;
};

std::string http_reply(int status, const std::string& body) {
    return "HTTP/1.1 " + std::to_string(status) +
           " X\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
}

// The client side's files, in a scratch directory.
struct ClientFiles {
    ClientFiles() : dir(fs::temp_directory_path() / ("agentctl-tls-test-" + std::to_string(::getpid()))) {
        fs::create_directories(dir);
        const auto client = make_certificate("agentctl-test-client");
        std::ofstream(dir / "client.crt") << client.cert;
        std::ofstream(dir / "client.key") << client.key;
    }
    ~ClientFiles() { fs::remove_all(dir); }
    HttpsRemote remote(const std::string& port, const std::string& pinned_pem) const {
        HttpsRemote r;
        r.name = "test";
        r.host = "127.0.0.1";
        r.port = port;
        r.client_cert = (dir / "client.crt").string();
        r.client_key = (dir / "client.key").string();
        r.client_ca = (dir / "client.ca").string();
        r.server_cert = (dir / "server.crt").string();
        fs::remove(r.server_cert);
        if (!pinned_pem.empty()) std::ofstream(r.server_cert) << pinned_pem;
        return r;
    }
    fs::path dir;
};

const std::string k_sync = R"({"type":"sync","status_code":200,"metadata":{"auth":"trusted"}})";

}  // namespace

TEST_CASE("HTTPS: the pinned server answers, and sees the client certificate", "[tls]") {
    const auto server_identity = make_certificate("incus-server");
    TlsServer server(server_identity, {http_reply(200, k_sync)});
    ClientFiles files;
    auto client = make_client(make_tls_transport(files.remote(server.port(), server_identity.cert), 5), "agents");
    const auto response = client->query("GET", "/1.0/instances", nullptr);
    CHECK(response.metadata.value("auth", "") == "trusted");
    REQUIRE(server.requests().size() == 1);
    CHECK_THAT(server.requests()[0], Catch::StartsWith("GET /1.0/instances?project=agents HTTP/1.1\r\n"));
    CHECK(server.client_certificates() == 1);
}

TEST_CASE("HTTPS: a server whose certificate is not the pinned one gets nothing", "[tls]") {
    const auto server_identity = make_certificate("incus-server");
    const auto other = make_certificate("incus-server");  // same name, another key
    TlsServer server(server_identity, {http_reply(200, k_sync)});
    ClientFiles files;
    auto transport = make_tls_transport(files.remote(server.port(), other.cert), 5);
    const auto error = test::error_and_hint_of([&] { (void)transport->send("GET", "/1.0", {}, {}); });
    CHECK_THAT(error, Catch::Contains("the Incus server at 127.0.0.1:" + server.port() +
                                      " (remote test) presented a certificate that is not the one pinned in " +
                                      (files.dir / "server.crt").string()));
    CHECK_THAT(error, Catch::Contains("nothing was sent"));
    CHECK(server.requests().empty());
}

TEST_CASE("HTTPS: an unpinned server that no CA vouches for is not trusted", "[tls]") {
    const auto server_identity = make_certificate("incus-server");
    TlsServer server(server_identity, {http_reply(200, k_sync)});
    ClientFiles files;
    auto transport = make_tls_transport(files.remote(server.port(), ""), 5);
    const auto error = test::error_and_hint_of([&] { (void)transport->send("GET", "/1.0", {}, {}); });
    CHECK_THAT(error, Catch::Contains("presented a certificate this machine does not trust (self-signed certificate)"));
    CHECK_THAT(error, Catch::Contains("none is pinned for it in " + (files.dir / "server.crt").string()));
    CHECK_THAT(error, Catch::Contains("incus remote add test https://127.0.0.1:" + server.port()));
    CHECK(server.requests().empty());
}

TEST_CASE("HTTPS: a client certificate the server does not trust says how to trust it", "[tls]") {
    const auto server_identity = make_certificate("incus-server");
    // incusd: 403 "not authorized" for the call, and GET /1.0 says auth: untrusted.
    TlsServer server(server_identity,
                     {http_reply(403, R"({"type":"error","error":"not authorized","error_code":403})"),
                      http_reply(200, R"({"type":"sync","status_code":200,"metadata":{"auth":"untrusted"}})")});
    ClientFiles files;
    auto client = make_client(make_tls_transport(files.remote(server.port(), server_identity.cert), 5));
    const auto error = test::error_and_hint_of([&] { (void)client->query("GET", "/1.0/instances", nullptr); });
    CHECK_THAT(error,
               Catch::Contains("does not trust this client's certificate " + (files.dir / "client.crt").string()));
    CHECK_THAT(error, Catch::Contains("incus config trust add-certificate"));
}

TEST_CASE("HTTPS: a 403 from a server that trusts the client stays Incus's own error", "[tls]") {
    const auto server_identity = make_certificate("incus-server");
    TlsServer server(server_identity,
                     {http_reply(403, R"({"type":"error","error":"Certificate is restricted","error_code":403})"),
                      http_reply(200, k_sync)});
    ClientFiles files;
    auto client = make_client(make_tls_transport(files.remote(server.port(), server_identity.cert), 5));
    CHECK_THAT(test::error_and_hint_of([&] { (void)client->query("GET", "/1.0/instances", nullptr); }),
               Catch::Contains("Incus refused GET /1.0/instances: Certificate is restricted"));
}

TEST_CASE("HTTPS: a closed port names host and port", "[tls]") {
    std::string port;
    {
        asio::io_context io;
        tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
        port = std::to_string(probe.local_endpoint().port());
    }  // closed again: nothing listens there now
    ClientFiles files;
    auto transport = make_tls_transport(files.remote(port, ""), 5);
    CHECK_THAT(
        test::error_and_hint_of([&] { (void)transport->send("GET", "/1.0", {}, {}); }),
        Catch::Contains("cannot reach the Incus server at 127.0.0.1:" + port + " (remote test): Connection refused"));
}

TEST_CASE("HTTPS: a listener that never answers the handshake times out, naming host and port", "[tls]") {
    asio::io_context io;
    tcp::acceptor silent(io, {asio::ip::make_address("127.0.0.1"), 0});  // the kernel accepts; nobody speaks
    const auto port = std::to_string(silent.local_endpoint().port());
    ClientFiles files;
    auto transport = make_tls_transport(files.remote(port, ""), 1);
    const auto started = std::chrono::steady_clock::now();
    CHECK_THAT(test::error_and_hint_of([&] { (void)transport->send("GET", "/1.0", {}, {}); }),
               Catch::Contains("the TLS handshake with the Incus server at 127.0.0.1:" + port +
                               " (remote test) failed: timed out"));
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}

TEST_CASE("HTTPS: a raw stream for websockets goes through the same TLS checks", "[tls]") {
    const auto server_identity = make_certificate("incus-server");
    TlsServer server(server_identity, {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"});
    ClientFiles files;
    auto transport = make_tls_transport(files.remote(server.port(), server_identity.cert), 5);
    auto stream = transport->open_stream();
    const std::string upgrade = "GET /1.0/operations/x/websocket?secret=s HTTP/1.1\r\nHost: incus\r\n\r\n";
    REQUIRE(stream->write_all(upgrade.data(), upgrade.size()));
    std::string answer;
    char buffer[256];
    while (answer.find("\r\n\r\n") == std::string::npos) {
        const auto n = stream->read_some(buffer, sizeof buffer);
        REQUIRE(n > 0);
        answer.append(buffer, n);
    }
    CHECK_THAT(answer, Catch::StartsWith("HTTP/1.1 101"));
    REQUIRE(stream->write_all("ping", 4));
    std::string echoed;
    while (echoed.size() < 4) {
        const auto n = stream->read_some(buffer, sizeof buffer);
        REQUIRE(n > 0);
        echoed.append(buffer, n);
    }
    CHECK(echoed == "ping");
    stream->shutdown();
}
