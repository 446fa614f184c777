// OpenSSL's functions, forwarded to libssl.so.3 opened on first use (why:
// openssl_on_demand.hpp).
//
// The list is every OpenSSL function the binary calls: those of the HTTPS
// transport (provider/incus/client/tls_transport.cpp), of the egress proxy's TLS
// termination (egress_proxy/sandbox_ca.cpp) and of Boost.Asio's SSL layer (boost/asio/ssl, header-only), in every
// build type (an unoptimised build calls a few that an optimised one folds
// away). A call to one that is missing here fails the link ("undefined
// reference"), so the list cannot silently fall behind the code. Each
// forwarder is defined with the prototype of OpenSSL's header, which the
// compiler checks: a C function declared twice with different parameters does
// not compile. The forwarders are hidden, so a program that also links OpenSSL
// itself (the transport's tests) keeps OpenSSL's own functions for OpenSSL's
// internal calls.
//
// The ABI is OpenSSL 3's: soname libssl.so.3, which resolves libcrypto.so.3
// as its own dependency; dlsym(3) on its handle searches both. The dynamic
// loader finds it the way it finds libc, which agentctl links anyway, so
// opening it adds no way to put other code into the process.
#include "core/openssl_on_demand.hpp"

#include <dlfcn.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "agentctl/error.hpp"

// X(return type, name, (parameters), (arguments))
#define AGENTCTL_OPENSSL_FUNCTIONS(X)                                                                                 \
    X(int, ASN1_INTEGER_set, (ASN1_INTEGER * a, long v), (a, v))                                                      \
    X(long, BIO_ctrl, (BIO * bp, int cmd, long larg, void* parg), (bp, cmd, larg, parg))                              \
    X(size_t, BIO_ctrl_pending, (BIO * b), (b))                                                                       \
    X(int, BIO_free, (BIO * a), (a))                                                                                  \
    X(BIO*, BIO_new, (const BIO_METHOD* type), (type))                                                                \
    X(int, BIO_new_bio_pair, (BIO * *bio1, size_t writebuf1, BIO * *bio2, size_t writebuf2),                          \
      (bio1, writebuf1, bio2, writebuf2))                                                                             \
    X(BIO*, BIO_new_mem_buf, (const void* buf, int len), (buf, len))                                                  \
    X(int, BIO_read, (BIO * b, void* data, int dlen), (b, data, dlen))                                                \
    X(const BIO_METHOD*, BIO_s_mem, (void), ())                                                                       \
    X(int, BIO_write, (BIO * b, const void* data, int dlen), (b, data, dlen))                                         \
    X(void, CRYPTO_free, (void* ptr, const char* file, int line), (ptr, file, line))                                  \
    X(void, ERR_clear_error, (void), ())                                                                              \
    X(unsigned long, ERR_get_error, (void), ())                                                                       \
    X(const char*, ERR_reason_error_string, (unsigned long e), (e))                                                   \
    X(void, EVP_PKEY_CTX_free, (EVP_PKEY_CTX * ctx), (ctx))                                                           \
    X(EVP_PKEY_CTX*, EVP_PKEY_CTX_new_id, (int id, ENGINE* e), (id, e))                                               \
    X(int, EVP_PKEY_CTX_set_ec_paramgen_curve_nid, (EVP_PKEY_CTX * ctx, int nid), (ctx, nid))                         \
    X(void, EVP_PKEY_free, (EVP_PKEY * pkey), (pkey))                                                                 \
    X(int, EVP_PKEY_keygen, (EVP_PKEY_CTX * ctx, EVP_PKEY * *ppkey), (ctx, ppkey))                                    \
    X(int, EVP_PKEY_keygen_init, (EVP_PKEY_CTX * ctx), (ctx))                                                         \
    X(const EVP_MD*, EVP_sha256, (void), ())                                                                          \
    X(EVP_PKEY*, PEM_read_bio_PrivateKey, (BIO * out, EVP_PKEY * *x, pem_password_cb * cb, void* u), (out, x, cb, u)) \
    X(X509*, PEM_read_bio_X509, (BIO * out, X509 * *x, pem_password_cb * cb, void* u), (out, x, cb, u))               \
    X(int, PEM_write_bio_PrivateKey,                                                                                  \
      (BIO * out, const EVP_PKEY* x, const EVP_CIPHER* enc, const unsigned char* kstr, int klen, pem_password_cb* cb, \
       void* u),                                                                                                      \
      (out, x, enc, kstr, klen, cb, u))                                                                               \
    X(int, PEM_write_bio_X509, (BIO * out, const X509* x), (out, x))                                                  \
    X(int, RAND_bytes, (unsigned char* buf, int num), (buf, num))                                                     \
    X(long, SSL_CTX_ctrl, (SSL_CTX * ctx, int cmd, long larg, void* parg), (ctx, cmd, larg, parg))                    \
    X(void, SSL_CTX_free, (SSL_CTX * ctx), (ctx))                                                                     \
    X(void*, SSL_CTX_get_default_passwd_cb_userdata, (SSL_CTX * ctx), (ctx))                                          \
    X(void*, SSL_CTX_get_ex_data, (const SSL_CTX* ssl, int idx), (ssl, idx))                                          \
    X(SSL_verify_cb, SSL_CTX_get_verify_callback, (const SSL_CTX* ctx), (ctx))                                        \
    X(int, SSL_CTX_load_verify_locations, (SSL_CTX * ctx, const char* ca_file, const char* ca_path),                  \
      (ctx, ca_file, ca_path))                                                                                        \
    X(SSL_CTX*, SSL_CTX_new, (const SSL_METHOD* meth), (meth))                                                        \
    X(void, SSL_CTX_set_default_passwd_cb_userdata, (SSL_CTX * ctx, void* u), (ctx, u))                               \
    X(int, SSL_CTX_set_default_verify_paths, (SSL_CTX * ctx), (ctx))                                                  \
    X(int, SSL_CTX_set_ex_data, (SSL_CTX * ssl, int idx, void* data), (ssl, idx, data))                               \
    X(uint64_t, SSL_CTX_set_options, (SSL_CTX * ctx, uint64_t op), (ctx, op))                                         \
    X(void, SSL_CTX_set_verify, (SSL_CTX * ctx, int mode, SSL_verify_cb callback), (ctx, mode, callback))             \
    X(int, SSL_CTX_use_PrivateKey_file, (SSL_CTX * ctx, const char* file, int type), (ctx, file, type))               \
    X(int, SSL_CTX_use_certificate_chain_file, (SSL_CTX * ctx, const char* file), (ctx, file))                        \
    X(int, SSL_accept, (SSL * ssl), (ssl))                                                                            \
    X(int, SSL_connect, (SSL * ssl), (ssl))                                                                           \
    X(long, SSL_ctrl, (SSL * ssl, int cmd, long larg, void* parg), (ssl, cmd, larg, parg))                            \
    X(void, SSL_free, (SSL * ssl), (ssl))                                                                             \
    X(int, SSL_get_error, (const SSL* s, int ret_code), (s, ret_code))                                                \
    X(void*, SSL_get_ex_data, (const SSL* ssl, int idx), (ssl, idx))                                                  \
    X(int, SSL_get_ex_data_X509_STORE_CTX_idx, (void), ())                                                            \
    X(int, SSL_get_shutdown, (const SSL* ssl), (ssl))                                                                 \
    X(int, SSL_get_verify_mode, (const SSL* s), (s))                                                                  \
    X(long, SSL_get_verify_result, (const SSL* ssl), (ssl))                                                           \
    X(SSL*, SSL_new, (SSL_CTX * ctx), (ctx))                                                                          \
    X(int, SSL_read, (SSL * ssl, void* buf, int num), (ssl, buf, num))                                                \
    X(int, SSL_set1_host, (SSL * s, const char* hostname), (s, hostname))                                             \
    X(void, SSL_set_bio, (SSL * s, BIO * rbio, BIO * wbio), (s, rbio, wbio))                                          \
    X(int, SSL_set_ex_data, (SSL * ssl, int idx, void* data), (ssl, idx, data))                                       \
    X(void, SSL_set_verify, (SSL * s, int mode, SSL_verify_cb callback), (s, mode, callback))                         \
    X(int, SSL_use_PrivateKey, (SSL * ssl, EVP_PKEY * pkey), (ssl, pkey))                                             \
    X(int, SSL_use_certificate, (SSL * ssl, X509 * x), (ssl, x))                                                      \
    X(int, SSL_write, (SSL * ssl, const void* buf, int num), (ssl, buf, num))                                         \
    X(const SSL_METHOD*, TLS_client_method, (void), ())                                                               \
    X(const SSL_METHOD*, TLS_method, (void), ())                                                                      \
    X(const SSL_METHOD*, TLS_server_method, (void), ())                                                               \
    X(X509_EXTENSION*, X509V3_EXT_conf_nid,                                                                           \
      (LHASH_OF(CONF_VALUE) * conf, X509V3_CTX * ctx, int ext_nid, const char* value), (conf, ctx, ext_nid, value))   \
    X(void, X509V3_set_ctx,                                                                                           \
      (X509V3_CTX * ctx, X509 * issuer, X509 * subject, X509_REQ * req, X509_CRL * crl, int flags),                   \
      (ctx, issuer, subject, req, crl, flags))                                                                        \
    X(void, X509_EXTENSION_free, (X509_EXTENSION * a), (a))                                                           \
    X(int, X509_NAME_add_entry_by_txt,                                                                                \
      (X509_NAME * name, const char* field, int type, const unsigned char* bytes, int len, int loc, int set),         \
      (name, field, type, bytes, len, loc, set))                                                                      \
    X(X509*, X509_STORE_CTX_get_current_cert, (const X509_STORE_CTX* ctx), (ctx))                                     \
    X(int, X509_STORE_CTX_get_error, (const X509_STORE_CTX* ctx), (ctx))                                              \
    X(int, X509_STORE_CTX_get_error_depth, (const X509_STORE_CTX* ctx), (ctx))                                        \
    X(void*, X509_STORE_CTX_get_ex_data, (const X509_STORE_CTX* ctx, int idx), (ctx, idx))                            \
    X(int, X509_add_ext, (X509 * x, X509_EXTENSION * ex, int loc), (x, ex, loc))                                      \
    X(int, X509_check_host, (X509 * x, const char* chk, size_t chklen, unsigned int flags, char** peername),          \
      (x, chk, chklen, flags, peername))                                                                              \
    X(int, X509_check_ip_asc, (X509 * x, const char* ipasc, unsigned int flags), (x, ipasc, flags))                   \
    X(void, X509_free, (X509 * a), (a))                                                                               \
    X(ASN1_INTEGER*, X509_get_serialNumber, (X509 * x), (x))                                                          \
    X(X509_NAME*, X509_get_subject_name, (const X509* a), (a))                                                        \
    X(ASN1_TIME*, X509_getm_notAfter, (const X509* x), (x))                                                           \
    X(ASN1_TIME*, X509_getm_notBefore, (const X509* x), (x))                                                          \
    X(ASN1_TIME*, X509_gmtime_adj, (ASN1_TIME * s, long adj), (s, adj))                                               \
    X(X509*, X509_new, (void), ())                                                                                    \
    X(int, X509_set_issuer_name, (X509 * x, const X509_NAME* name), (x, name))                                        \
    X(int, X509_set_pubkey, (X509 * x, EVP_PKEY * pkey), (x, pkey))                                                   \
    X(int, X509_set_version, (X509 * x, long version), (x, version))                                                  \
    X(int, X509_sign, (X509 * x, EVP_PKEY * pkey, const EVP_MD* md), (x, pkey, md))                                   \
    X(const char*, X509_verify_cert_error_string, (long n), (n))                                                      \
    X(int, i2d_X509, (const X509* a, unsigned char** out), (a, out))

namespace {

constexpr const char* k_soname = "libssl.so.3";

struct OpenSsl {
#define AGENTCTL_OPENSSL_SLOT(ret, name, params, args) decltype(&::name) name = nullptr;
    AGENTCTL_OPENSSL_FUNCTIONS(AGENTCTL_OPENSSL_SLOT)
#undef AGENTCTL_OPENSSL_SLOT
    std::string problem;  // empty once every function is resolved
};

OpenSsl load() {
    OpenSsl functions;
    void* handle = ::dlopen(k_soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = ::dlerror();
        functions.problem = fmt::format("cannot load OpenSSL ({}): {}", k_soname, why != nullptr ? why : "not found");
        return functions;
    }
    std::string missing;
#define AGENTCTL_OPENSSL_RESOLVE(ret, name, params, args)                                \
    functions.name = reinterpret_cast<decltype(functions.name)>(::dlsym(handle, #name)); \
    if (functions.name == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#name);
    AGENTCTL_OPENSSL_FUNCTIONS(AGENTCTL_OPENSSL_RESOLVE)
#undef AGENTCTL_OPENSSL_RESOLVE
    if (!missing.empty()) functions.problem = fmt::format("{} lacks functions agentctl calls: {}", k_soname, missing);
    return functions;  // the handle stays open for the life of the process
}

const OpenSsl& openssl() {
    static const OpenSsl functions = load();
    return functions;
}

// Only reached when something calls OpenSSL without require_openssl() first.
const OpenSsl& loaded_openssl() {
    const auto& functions = openssl();
    if (!functions.problem.empty()) {
        std::fprintf(stderr, "agentctl: %s\n", functions.problem.c_str());
        std::abort();
    }
    return functions;
}

}  // namespace

#define AGENTCTL_OPENSSL_FORWARD(ret, name, params, args) \
    extern "C" __attribute__((visibility("hidden"))) ret name params { return loaded_openssl().name args; }
AGENTCTL_OPENSSL_FUNCTIONS(AGENTCTL_OPENSSL_FORWARD)
#undef AGENTCTL_OPENSSL_FORWARD

namespace agentctl::core {

void require_openssl(std::string_view purpose) {
    const auto& functions = openssl();
    if (functions.problem.empty()) return;
    throw Error(fmt::format("{}; agentctl needs it for {}", functions.problem, purpose),
                "install Debian's libssl3 package (apt-get install libssl3)");
}

}  // namespace agentctl::core
