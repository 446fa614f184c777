// The per-sandbox certificate authority of TLS termination: agentctl makes one
// for each sandbox that has secrets (its key stays on the host, mode 0600 in
// the user's state; the guest gets the certificate only), and the sandbox's
// proxy mints a certificate per terminated host from it, on first use.
// OpenSSL types stay out of this header.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

struct ssl_st;
struct x509_st;
struct evp_pkey_st;

namespace agentctl::egress_proxy {

struct CaPem {
    std::string cert;
    std::string key;
};

// A new CA for `sandbox`: an ECDSA P-256 key, a certificate valid for ten
// years that may sign server certificates only (path length 0).
[[nodiscard]] CaPem make_sandbox_ca(std::string_view sandbox);

// The sandbox's CA from `dir/egress-ca.crt` and `dir/egress-ca.key` (the key
// 0600), made and written on first use. Throws agentctl::Error naming the file.
[[nodiscard]] CaPem load_or_make_sandbox_ca(const std::filesystem::path& dir, std::string_view sandbox);

// Server certificates for the terminated hosts, signed by the sandbox CA and
// cached for the proxy's lifetime; thread-safe.
class LeafCertificates {
public:
    // Throws agentctl::Error when the CA's certificate or key do not parse.
    LeafCertificates(const std::string& ca_cert_pem, const std::string& ca_key_pem);
    ~LeafCertificates();
    LeafCertificates(const LeafCertificates&) = delete;
    LeafCertificates& operator=(const LeafCertificates&) = delete;

    // Sets the certificate for `host` (minted on first use) and its key on
    // `ssl`, before the handshake. False when minting failed.
    bool present(ssl_st* ssl, std::string_view host);
    // Certificates minted so far (each host once).
    [[nodiscard]] std::size_t minted() const;
    // Cached certificates are dropped (the next handshake mints again).
    void clear();

private:
    x509_st* m_ca_cert = nullptr;
    evp_pkey_st* m_ca_key = nullptr;
    evp_pkey_st* m_leaf_key = nullptr;  // one key for every leaf
    mutable std::mutex m_mutex;
    std::unordered_map<std::string, std::shared_ptr<x509_st>> m_leaves;
    std::size_t m_minted = 0;
};

}  // namespace agentctl::egress_proxy
