// OpenSSL's functions, forwarded to libssl.so.3 opened on first use (why:
// openssl_on_demand.hpp).
//
// The list is every OpenSSL function the binary calls: tls_transport.cpp's own
// and those of Boost.Asio's SSL layer (boost/asio/ssl, header-only), in every
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
#include "provider/incus/openssl_on_demand.hpp"

#include <dlfcn.h>
#include <openssl/bio.h>
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
#define AGENTCTL_OPENSSL_FUNCTIONS(X)                                                                        \
    X(long, BIO_ctrl, (BIO * bp, int cmd, long larg, void* parg), (bp, cmd, larg, parg))                     \
    X(size_t, BIO_ctrl_pending, (BIO * b), (b))                                                              \
    X(int, BIO_free, (BIO * a), (a))                                                                         \
    X(int, BIO_new_bio_pair, (BIO * *bio1, size_t writebuf1, BIO * *bio2, size_t writebuf2),                 \
      (bio1, writebuf1, bio2, writebuf2))                                                                    \
    X(BIO*, BIO_new_mem_buf, (const void* buf, int len), (buf, len))                                         \
    X(int, BIO_read, (BIO * b, void* data, int dlen), (b, data, dlen))                                       \
    X(int, BIO_write, (BIO * b, const void* data, int dlen), (b, data, dlen))                                \
    X(void, CRYPTO_free, (void* ptr, const char* file, int line), (ptr, file, line))                         \
    X(void, ERR_clear_error, (void), ())                                                                     \
    X(unsigned long, ERR_get_error, (void), ())                                                              \
    X(const char*, ERR_reason_error_string, (unsigned long e), (e))                                          \
    X(X509*, PEM_read_bio_X509, (BIO * out, X509 * *x, pem_password_cb * cb, void* u), (out, x, cb, u))      \
    X(long, SSL_CTX_ctrl, (SSL_CTX * ctx, int cmd, long larg, void* parg), (ctx, cmd, larg, parg))           \
    X(void, SSL_CTX_free, (SSL_CTX * ctx), (ctx))                                                            \
    X(void*, SSL_CTX_get_default_passwd_cb_userdata, (SSL_CTX * ctx), (ctx))                                 \
    X(void*, SSL_CTX_get_ex_data, (const SSL_CTX* ssl, int idx), (ssl, idx))                                 \
    X(SSL_verify_cb, SSL_CTX_get_verify_callback, (const SSL_CTX* ctx), (ctx))                               \
    X(int, SSL_CTX_load_verify_locations, (SSL_CTX * ctx, const char* ca_file, const char* ca_path),         \
      (ctx, ca_file, ca_path))                                                                               \
    X(SSL_CTX*, SSL_CTX_new, (const SSL_METHOD* meth), (meth))                                               \
    X(void, SSL_CTX_set_default_passwd_cb_userdata, (SSL_CTX * ctx, void* u), (ctx, u))                      \
    X(int, SSL_CTX_set_default_verify_paths, (SSL_CTX * ctx), (ctx))                                         \
    X(int, SSL_CTX_set_ex_data, (SSL_CTX * ssl, int idx, void* data), (ssl, idx, data))                      \
    X(uint64_t, SSL_CTX_set_options, (SSL_CTX * ctx, uint64_t op), (ctx, op))                                \
    X(void, SSL_CTX_set_verify, (SSL_CTX * ctx, int mode, SSL_verify_cb callback), (ctx, mode, callback))    \
    X(int, SSL_CTX_use_PrivateKey_file, (SSL_CTX * ctx, const char* file, int type), (ctx, file, type))      \
    X(int, SSL_CTX_use_certificate_chain_file, (SSL_CTX * ctx, const char* file), (ctx, file))               \
    X(int, SSL_accept, (SSL * ssl), (ssl))                                                                   \
    X(int, SSL_connect, (SSL * ssl), (ssl))                                                                  \
    X(long, SSL_ctrl, (SSL * ssl, int cmd, long larg, void* parg), (ssl, cmd, larg, parg))                   \
    X(void, SSL_free, (SSL * ssl), (ssl))                                                                    \
    X(int, SSL_get_error, (const SSL* s, int ret_code), (s, ret_code))                                       \
    X(void*, SSL_get_ex_data, (const SSL* ssl, int idx), (ssl, idx))                                         \
    X(int, SSL_get_ex_data_X509_STORE_CTX_idx, (void), ())                                                   \
    X(int, SSL_get_shutdown, (const SSL* ssl), (ssl))                                                        \
    X(int, SSL_get_verify_mode, (const SSL* s), (s))                                                         \
    X(SSL*, SSL_new, (SSL_CTX * ctx), (ctx))                                                                 \
    X(int, SSL_read, (SSL * ssl, void* buf, int num), (ssl, buf, num))                                       \
    X(void, SSL_set_bio, (SSL * s, BIO * rbio, BIO * wbio), (s, rbio, wbio))                                 \
    X(int, SSL_set_ex_data, (SSL * ssl, int idx, void* data), (ssl, idx, data))                              \
    X(void, SSL_set_verify, (SSL * s, int mode, SSL_verify_cb callback), (s, mode, callback))                \
    X(int, SSL_write, (SSL * ssl, const void* buf, int num), (ssl, buf, num))                                \
    X(const SSL_METHOD*, TLS_client_method, (void), ())                                                      \
    X(const SSL_METHOD*, TLS_method, (void), ())                                                             \
    X(const SSL_METHOD*, TLS_server_method, (void), ())                                                      \
    X(X509*, X509_STORE_CTX_get_current_cert, (const X509_STORE_CTX* ctx), (ctx))                            \
    X(int, X509_STORE_CTX_get_error, (const X509_STORE_CTX* ctx), (ctx))                                     \
    X(int, X509_STORE_CTX_get_error_depth, (const X509_STORE_CTX* ctx), (ctx))                               \
    X(void*, X509_STORE_CTX_get_ex_data, (const X509_STORE_CTX* ctx, int idx), (ctx, idx))                   \
    X(int, X509_check_host, (X509 * x, const char* chk, size_t chklen, unsigned int flags, char** peername), \
      (x, chk, chklen, flags, peername))                                                                     \
    X(int, X509_check_ip_asc, (X509 * x, const char* ipasc, unsigned int flags), (x, ipasc, flags))          \
    X(void, X509_free, (X509 * a), (a))                                                                      \
    X(const char*, X509_verify_cert_error_string, (long n), (n))                                             \
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

namespace agentctl::provider::incus {

void require_openssl() {
    const auto& functions = openssl();
    if (functions.problem.empty()) return;
    throw Error(functions.problem + "; agentctl needs it for HTTPS to a remote Incus server",
                "install Debian's libssl3 package (apt-get install libssl3)");
}

}  // namespace agentctl::provider::incus
