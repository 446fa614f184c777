// The HTTPS Transport: HTTP/1.1 over TLS (Boost.Beast over Asio SSL, OpenSSL
// loaded on first use: core/openssl_on_demand.hpp)
// to a remote Incus server, with the client's certificate, one connection per
// request (the Go client disables keep-alives too: client/util.go,
// tlsHTTPClient). The whole exchange is bounded by a deadline.
//
// Which server certificate is accepted:
//   - servercerts/NAME.crt exists (`incus remote add` writes it once the user
//     accepted the fingerprint): the server's certificate must be exactly that
//     one (same DER bytes); CA signatures, names and dates play no part. The Go
//     client adds the file as a trusted root and checks the name in it
//     (shared/tls/tls.go, TLSConfigWithTrustedCert); an exact match is the
//     stricter reading of "pinned" and what a self-signed Incus server
//     certificate amounts to.
//   - no such file: the certificate must chain to the client's CA
//     (client.ca / clientcerts/NAME.ca, which replaces the system's roots as
//     in GetTLSConfigMem) or to the system's roots, and name the host.
#include <utility>  // must precede Asio (std::exchange in awaitable.hpp on g++ 12)

#include <arpa/inet.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/client/http_message.hpp"
#include "core/openssl_on_demand.hpp"
#include "provider/incus/client/remote.hpp"

namespace agentctl::provider::incus {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

constexpr int k_connect_timeout = 15;  // seconds

std::string der_of(X509* cert) {
    if (cert == nullptr) return {};
    unsigned char* der = nullptr;
    const int size = i2d_X509(cert, &der);
    if (size <= 0) return {};
    std::string out(reinterpret_cast<const char*>(der), static_cast<std::size_t>(size));
    OPENSSL_free(der);
    return out;
}

// The DER bytes of the first certificate in a PEM file; empty when the file
// holds none. Throws when it cannot be read.
std::string pem_file_der(const std::string& path) {
    auto text = core::read_file_if_exists(path);
    if (!text) return {};
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(text->data(), static_cast<int>(text->size())),
                                                  &BIO_free);
    std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                     &X509_free);
    if (!cert) {
        throw Error(fmt::format("{} holds no PEM certificate", path),
                    "it is the server certificate pinned for the remote; replace it with the server's certificate "
                    "(incus remote add writes it)");
    }
    return der_of(cert.get());
}

bool is_ip_literal(const std::string& host) {
    unsigned char buffer[16];
    return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 || ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

// What the verify callback saw during one handshake.
struct Verdict {
    bool pin_mismatch = false;
    std::string verify_error;  // why the certificate is not trusted (unpinned)
};

class TlsConnection final : public ByteStream {
public:
    TlsConnection(ssl::context& context) : m_stream(m_io, context) {}
    asio::io_context& io() { return m_io; }
    TlsStream& stream() { return m_stream; }

    std::size_t read_some(char* out, std::size_t size) override { return read_some_from(m_stream, out, size); }
    bool write_all(const char* data, std::size_t size) override { return write_all_to(m_stream, data, size); }
    void shutdown() override {
        beast::error_code ignored;
        beast::get_lowest_layer(m_stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
    }

private:
    asio::io_context m_io;
    TlsStream m_stream;
};

// Runs one asynchronous operation to completion on `io`; its error.
template <class Start>
beast::error_code run(asio::io_context& io, Start start) {
    beast::error_code result;
    start([&](beast::error_code ec, auto&&...) { result = ec; });
    io.restart();
    io.run();
    return result;
}

class TlsTransport final : public Transport {
public:
    TlsTransport(const HttpsRemote& remote, int timeout_seconds)
        : m_remote(remote), m_timeout(timeout_seconds), m_context(ssl::context::tls_client) {
        m_context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                              ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
        beast::error_code ec;
        m_context.use_certificate_chain_file(m_remote.client_cert, ec);
        if (ec) throw certificate_error(m_remote.client_cert, "the client certificate", ec);
        m_context.use_private_key_file(m_remote.client_key, ssl::context::pem, ec);
        if (ec) throw certificate_error(m_remote.client_key, "the client key", ec);
        m_pin = pem_file_der(m_remote.server_cert);
        if (m_pin.empty()) {
            std::error_code exists_ec;
            if (std::filesystem::exists(m_remote.client_ca, exists_ec)) {
                m_context.load_verify_file(m_remote.client_ca, ec);
                if (ec) throw certificate_error(m_remote.client_ca, "the client's CA certificate", ec);
            } else {
                m_context.set_default_verify_paths();
            }
        }
        m_context.set_verify_mode(ssl::verify_peer);
    }

    HttpResponse send(std::string_view method, std::string_view target, std::string_view body,
                      std::string_view content_type) override {
        auto response = logged_exchange(m_remote.name, method, target,
                                        [&] { return exchange(method, target, body, content_type); });
        if (response.status == 403) refuse_if_untrusted();
        return response;
    }

    std::unique_ptr<ByteStream> open_stream() override {
        auto connection = connect();
        beast::get_lowest_layer(connection->stream()).expires_never();
        return connection;
    }

    [[nodiscard]] std::string endpoint() const override {
        return fmt::format("{} (remote {})", address(), m_remote.name);
    }

private:
    [[nodiscard]] std::string address() const { return "https://" + host_port(); }
    [[nodiscard]] std::string host_port() const {
        const bool v6 = m_remote.host.find(':') != std::string::npos;
        return fmt::format("{}:{}", v6 ? "[" + m_remote.host + "]" : m_remote.host, m_remote.port);
    }

    Error certificate_error(const std::string& path, std::string_view what, const beast::error_code& ec) const {
        return Error(
            fmt::format("cannot use {} {} of Incus remote \"{}\": {}", what, path, m_remote.name, ec.message()),
            "it must be a PEM file the incus client can use too: check `incus remote list`");
    }

    // Connected, handshake done, the server's certificate checked.
    std::unique_ptr<TlsConnection> connect() {
        auto connection = std::make_unique<TlsConnection>(m_context);
        auto& io = connection->io();
        auto& stream = connection->stream();
        auto& lowest = beast::get_lowest_layer(stream);
        // Reaching the server and the handshake get at most k_connect_timeout
        // (the Go client's TLS handshake timeout is 5 s: client/util.go).
        lowest.expires_after(std::chrono::seconds(std::min(m_timeout, k_connect_timeout)));

        tcp::resolver resolver(io);
        beast::error_code ec;
        const auto endpoints = resolver.resolve(m_remote.host, m_remote.port, ec);
        if (ec) {
            throw Error(fmt::format("cannot resolve the Incus server {} (remote {}): {}", m_remote.host, m_remote.name,
                                    ec.message()),
                        "check the address of the remote: `incus remote list`");
        }
        ec = run(io, [&](auto handler) { lowest.async_connect(endpoints, handler); });
        if (ec) {
            throw Error(fmt::format("cannot reach the Incus server at {} (remote {}): {}", host_port(), m_remote.name,
                                    ec == beast::error::timeout ? "timed out" : ec.message()),
                        fmt::format("check that the server is up and listens on HTTPS there "
                                    "(on the server: incus config get core.https_address), and that nothing "
                                    "blocks port {} on the way",
                                    m_remote.port));
        }

        if (!is_ip_literal(m_remote.host)) SSL_set_tlsext_host_name(stream.native_handle(), m_remote.host.c_str());
        Verdict verdict;
        if (!m_pin.empty()) {
            stream.set_verify_callback([this, &verdict](bool, ssl::verify_context& context) {
                X509_STORE_CTX* store = context.native_handle();
                if (X509_STORE_CTX_get_error_depth(store) > 0) return true;  // only the server's own counts
                if (der_of(X509_STORE_CTX_get_current_cert(store)) == m_pin) return true;
                verdict.pin_mismatch = true;
                return false;
            });
        } else {
            stream.set_verify_callback([&verdict, check = ssl::host_name_verification(m_remote.host)](
                                           bool preverified, ssl::verify_context& context) {
                if (check(preverified, context)) return true;
                const int error = X509_STORE_CTX_get_error(context.native_handle());
                verdict.verify_error =
                    error == X509_V_OK ? std::string("it names another host") : X509_verify_cert_error_string(error);
                return false;
            });
        }
        ec = run(io, [&](auto handler) { stream.async_handshake(ssl::stream_base::client, handler); });
        if (verdict.pin_mismatch) {
            throw Error(
                fmt::format("the Incus server at {} (remote {}) presented a certificate that is not the one pinned "
                            "in {}: its certificate changed, or this is another server",
                            host_port(), m_remote.name, m_remote.server_cert),
                fmt::format("nothing was sent. If the server's certificate really was replaced, compare its "
                            "fingerprint (on the server: incus info | grep certificate_fingerprint) and then "
                            "replace {} with it (or run incus remote remove/add {}); otherwise do not connect",
                            m_remote.server_cert, m_remote.name));
        }
        if (!verdict.verify_error.empty()) {
            throw Error(
                fmt::format("the Incus server at {} (remote {}) presented a certificate this machine does not trust "
                            "({}), and none is pinned for it in {}",
                            host_port(), m_remote.name, verdict.verify_error, m_remote.server_cert),
                fmt::format("nothing was sent. Add the remote with `incus remote add {} {}` and accept the "
                            "fingerprint only after checking it on the server, which pins its certificate",
                            m_remote.name, address()));
        }
        if (ec) {
            throw Error(fmt::format("the TLS handshake with the Incus server at {} (remote {}) failed: {}", host_port(),
                                    m_remote.name, ec == beast::error::timeout ? "timed out" : ec.message()),
                        "is that port an Incus HTTPS listener? (on the server: incus config get core.https_address)");
        }
        return connection;
    }

    HttpResponse exchange(std::string_view method, std::string_view target, std::string_view body,
                          std::string_view content_type) {
        auto connection = connect();
        auto& stream = connection->stream();
        beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(m_timeout));
        auto request = build_request(method, target, body, content_type, host_port());
        http::response_parser<http::string_body> parser;
        allow_large_bodies(parser);
        beast::flat_buffer buffer;
        std::string phase = "sending";
        auto ec = run(connection->io(), [&](auto handler) { http::async_write(stream, request, handler); });
        if (!ec) {
            phase = "reading the answer to";
            ec = run(connection->io(), [&](auto handler) { http::async_read(stream, buffer, parser, handler); });
        }
        if (ec) {
            throw Error(
                fmt::format("the Incus server at {} (remote {}) failed while {} {} {}: {}", host_port(), m_remote.name,
                            phase, method, target, ec == beast::error::timeout ? "timed out" : ec.message()),
                "check that the server is healthy (its log: /var/log/incus/ on the server)");
        }
        beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ec);
        return to_response(parser.release());
    }

    // Incus answers every request of a client whose certificate it does not
    // trust with 403 "not authorized" (incusd: the untrusted branch of
    // Daemon.createCmd); GET /1.0 then says `"auth": "untrusted"`.
    void refuse_if_untrusted() {
        if (m_checked_trust.exchange(true)) return;
        std::string auth;
        try {
            const auto info = parse_envelope(exchange("GET", "/1.0", {}, {}).body, 200);
            auth = info.metadata.is_object() ? info.metadata.value("auth", std::string()) : std::string();
        } catch (const Error&) {
            return;  // the caller reports the 403 itself
        }
        if (auth != "untrusted") return;
        throw Error(
            fmt::format("the Incus server at {} (remote {}) does not trust this client's certificate {} (it answered "
                        "\"not authorized\")",
                        host_port(), m_remote.name, m_remote.client_cert),
            fmt::format("on the server, trust it: incus config trust add-certificate CERT (copy {} there as CERT), "
                        "or use a trust token: incus config trust add NAME, then incus remote add {} TOKEN",
                        m_remote.client_cert, m_remote.name));
    }

    HttpsRemote m_remote;
    int m_timeout;
    ssl::context m_context;
    std::string m_pin;                          // DER of the pinned server certificate; empty: none
    std::atomic<bool> m_checked_trust = false;  // sends may run on several threads at once
};

}  // namespace

std::unique_ptr<Transport> make_tls_transport(const HttpsRemote& remote, int timeout_seconds) {
    core::require_openssl("HTTPS to a remote Incus server");
    return std::make_unique<TlsTransport>(remote, timeout_seconds);
}

}  // namespace agentctl::provider::incus
