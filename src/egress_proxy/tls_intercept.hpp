// What a proxy needs to terminate TLS for the hosts its sandbox's secrets are
// bound to: the secrets, the leaf certificates of the sandbox CA, and the two
// TLS contexts (toward the sandbox, and toward the real hosts, whose
// certificates are checked against the system's trust store). Built once at
// start from the payload read from `--secrets-fd`; shared by every event loop.
#pragma once

#include <utility>  // before Asio: awaitable.hpp needs std::exchange on g++ 12

#include <boost/asio/ssl/context.hpp>

#include <memory>
#include <string>
#include <vector>

#include "egress_proxy/sandbox_ca.hpp"
#include "egress_proxy/secret_injection.hpp"
#include "egress_proxy/shared_snapshot.hpp"

namespace agentctl::egress_proxy {

class TlsIntercept {
public:
    // `extra_ca_file`: a CA trusted besides the system's for the real hosts
    // (test origins); empty: the system's trust store only.
    TlsIntercept(SecretPayload payload, const std::string& extra_ca_file);

    // The secrets in force: a request keeps the table it started with.
    [[nodiscard]] std::shared_ptr<const SecretTable> secrets() const { return m_secrets.get(); }
    // `secret set` on a running sandbox: the values of `fresh` from the next
    // request on (with_values). Returns the names whose value changed.
    std::vector<std::string> rotate(const std::vector<InjectedSecret>& fresh);
    [[nodiscard]] LeafCertificates& leaves() { return m_leaves; }
    [[nodiscard]] boost::asio::ssl::context& sandbox_side() { return m_sandbox_side; }
    [[nodiscard]] boost::asio::ssl::context& origin_side() { return m_origin_side; }

private:
    SharedSnapshot<SecretTable> m_secrets;
    LeafCertificates m_leaves;
    boost::asio::ssl::context m_sandbox_side;
    boost::asio::ssl::context m_origin_side;
};

// Reads the payload from descriptor `fd` to its end and closes it. Throws
// agentctl::Error when it cannot be read or parsed (never quoting it).
[[nodiscard]] SecretPayload read_secret_payload(int fd);

}  // namespace agentctl::egress_proxy
