#include "egress_proxy/tls_intercept.hpp"

#include <unistd.h>

#include <string.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/openssl_on_demand.hpp"

namespace agentctl::egress_proxy {
namespace {

namespace ssl = boost::asio::ssl;

constexpr auto k_tls_options = ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                               ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::no_compression;

// Built after require_openssl: constructing a context calls OpenSSL.
ssl::context context_for(ssl::context::method method) {
    core::require_openssl("terminating TLS for the hosts a sandbox's secrets are bound to");
    ssl::context context(method);
    context.set_options(k_tls_options);
    return context;
}

}  // namespace

TlsIntercept::TlsIntercept(SecretPayload payload, const std::string& extra_ca_file)
    : m_leaves(payload.ca_cert_pem, payload.ca_key_pem),
      m_sandbox_side(context_for(ssl::context::tls_server)),
      m_origin_side(context_for(ssl::context::tls_client)) {
    boost::system::error_code ec;
    m_origin_side.set_default_verify_paths(ec);
    if (!ec && !extra_ca_file.empty()) m_origin_side.load_verify_file(extra_ca_file, ec);
    if (ec) {
        throw Error(fmt::format("cannot load the certificates the egress proxy checks hosts against{}: {}",
                                extra_ca_file.empty() ? "" : " (" + extra_ca_file + ")", ec.message()),
                    "install ca-certificates");
    }
    m_origin_side.set_verify_mode(ssl::verify_peer);
    m_secrets.set(std::make_shared<const SecretTable>(std::move(payload.secrets)));
}

std::vector<std::string> TlsIntercept::rotate(const std::vector<InjectedSecret>& fresh) {
    std::vector<std::string> changed;
    m_secrets.set(std::make_shared<const SecretTable>(m_secrets.get()->with_values(fresh, changed)));
    return changed;
}

SecretPayload read_secret_payload(int fd) {
    std::string text;
    char buffer[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n > 0) {
            text.append(buffer, static_cast<std::size_t>(n));
        } else if (n == 0) {
            break;
        } else if (errno != EINTR) {
            const int error = errno;
            ::close(fd);
            throw Error(fmt::format("--secrets-fd {}: cannot read: {}", fd, std::strerror(error)),
                        "the egress proxy is started by agentctl, which hands it its secrets");
        }
    }
    ::close(fd);
    auto payload = parse_secret_payload(text);
    // The text held the values: wipe it before it is freed.
    ::explicit_bzero(text.data(), text.size());
    return payload;
}

}  // namespace agentctl::egress_proxy
