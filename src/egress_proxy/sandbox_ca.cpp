#include "egress_proxy/sandbox_ca.hpp"

#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdint>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "core/openssl_on_demand.hpp"

namespace agentctl::egress_proxy {
namespace {

constexpr long k_ca_days = 3650;
// A leaf lives as long as its proxy at most; a week covers any one run, and a
// restarted proxy mints again.
constexpr long k_leaf_days = 7;

struct KeyFree {
    void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CertFree {
    void operator()(X509* cert) const { X509_free(cert); }
};
struct BioFree {
    void operator()(BIO* bio) const { BIO_free(bio); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;
using Bio = std::unique_ptr<BIO, BioFree>;

Error openssl_error(std::string_view what) {
    return Error(fmt::format("cannot {}: OpenSSL refused", what), "reinstall libssl3");
}

Key make_key() {
    EVP_PKEY_CTX* context = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nullptr);
    EVP_PKEY* key = nullptr;
    const bool ok = context != nullptr && EVP_PKEY_keygen_init(context) == 1 &&
                    EVP_PKEY_CTX_set_ec_paramgen_curve_nid(context, NID_X9_62_prime256v1) == 1 &&
                    EVP_PKEY_keygen(context, &key) == 1;
    EVP_PKEY_CTX_free(context);
    if (!ok) throw openssl_error("make a key");
    return Key(key);
}

bool add_extension(X509* cert, X509* issuer, int nid, const char* value) {
    X509V3_CTX context;
    X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
    if (extension == nullptr) return false;
    const bool ok = X509_add_ext(cert, extension, -1) == 1;
    X509_EXTENSION_free(extension);
    return ok;
}

// A certificate for `key` named `common_name`, valid `days`; signed by
// `issuer`/`issuer_key`, or by itself when `issuer` is null.
Cert make_certificate(EVP_PKEY* key, const std::string& common_name, long days, X509* issuer, EVP_PKEY* issuer_key) {
    Cert cert(X509_new());
    std::uint64_t serial = 0;
    if (!cert || RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof serial) != 1) return nullptr;
    bool ok = X509_set_version(cert.get(), 2) == 1 &&
              ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), static_cast<long>(serial >> 2)) == 1 &&
              X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr &&
              X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 24 * 3600) != nullptr &&
              X509_set_pubkey(cert.get(), key) == 1;
    X509_NAME* name = X509_get_subject_name(cert.get());
    ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                          reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0) == 1;
    X509* signer = issuer != nullptr ? issuer : cert.get();
    ok = ok && X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) == 1;
    if (issuer == nullptr) {
        ok = ok && add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
             add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
             add_extension(cert.get(), signer, NID_subject_key_identifier, "hash");
    } else {
        const std::string alt_name = "DNS:" + common_name;
        ok = ok && add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
             add_extension(cert.get(), signer, NID_key_usage, "critical,digitalSignature") &&
             add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth") &&
             add_extension(cert.get(), signer, NID_subject_alt_name, alt_name.c_str()) &&
             add_extension(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
    }
    ok = ok && X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0;
    return ok ? std::move(cert) : nullptr;
}

std::string bio_text(BIO* bio) {
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio, &data);
    return size > 0 ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

Bio read_bio(const std::string& pem) { return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

}  // namespace

CaPem make_sandbox_ca(std::string_view sandbox) {
    core::require_openssl("the certificate authority of a sandbox with secrets");
    auto key = make_key();
    auto cert =
        make_certificate(key.get(), fmt::format("agentctl sandbox {} CA", sandbox), k_ca_days, nullptr, nullptr);
    if (!cert) throw openssl_error("make the sandbox's certificate authority");
    Bio cert_bio(BIO_new(BIO_s_mem()));
    Bio key_bio(BIO_new(BIO_s_mem()));
    if (!cert_bio || !key_bio || PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1 ||
        PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
        throw openssl_error("write the sandbox's certificate authority");
    }
    return {bio_text(cert_bio.get()), bio_text(key_bio.get())};
}

CaPem load_or_make_sandbox_ca(const std::filesystem::path& dir, std::string_view sandbox) {
    const auto cert_file = dir / "egress-ca.crt";
    const auto key_file = dir / "egress-ca.key";
    auto cert = core::read_file_if_exists(cert_file);
    auto key = core::read_file_if_exists(key_file);
    if (cert && key) return {std::move(*cert), std::move(*key)};
    auto made = make_sandbox_ca(sandbox);
    core::write_file_atomic(key_file, made.key, 0600);
    core::write_file_atomic(cert_file, made.cert, 0644);
    return made;
}

LeafCertificates::LeafCertificates(const std::string& ca_cert_pem, const std::string& ca_key_pem) {
    core::require_openssl("terminating TLS for the hosts a sandbox's secrets are bound to");
    auto cert_bio = read_bio(ca_cert_pem);
    auto key_bio = read_bio(ca_key_pem);
    m_ca_cert = cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr;
    m_ca_key = key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr;
    if (m_ca_cert == nullptr || m_ca_key == nullptr) {
        X509_free(m_ca_cert);
        EVP_PKEY_free(m_ca_key);
        throw Error("the sandbox's certificate authority does not parse",
                    "delete egress-ca.crt and egress-ca.key in the sandbox's state directory, then restart it");
    }
    m_leaf_key = make_key().release();
}

LeafCertificates::~LeafCertificates() {
    m_leaves.clear();
    EVP_PKEY_free(m_leaf_key);
    EVP_PKEY_free(m_ca_key);
    X509_free(m_ca_cert);
}

bool LeafCertificates::present(ssl_st* ssl, std::string_view host) {
    std::shared_ptr<X509> leaf;
    {
        std::lock_guard lock(m_mutex);
        auto found = m_leaves.find(std::string(host));
        if (found != m_leaves.end()) leaf = found->second;
    }
    if (!leaf) {
        // Minted outside the lock: another loop's handshake for a cached host need not wait.
        auto made = make_certificate(m_leaf_key, std::string(host), k_leaf_days, m_ca_cert, m_ca_key);
        if (!made) return false;
        leaf = std::shared_ptr<X509>(made.release(), CertFree{});
        std::lock_guard lock(m_mutex);
        auto [it, inserted] = m_leaves.emplace(std::string(host), leaf);
        if (inserted) ++m_minted;
        leaf = it->second;
    }
    return SSL_use_certificate(ssl, leaf.get()) == 1 && SSL_use_PrivateKey(ssl, m_leaf_key) == 1;
}

std::size_t LeafCertificates::minted() const {
    std::lock_guard lock(m_mutex);
    return m_minted;
}

void LeafCertificates::clear() {
    std::lock_guard lock(m_mutex);
    m_leaves.clear();
}

}  // namespace agentctl::egress_proxy
