// OpenSSL, loaded when the HTTPS transport first needs it.
//
// OpenSSL serves the HTTPS transport to a remote Incus server and the egress
// proxy of a sandbox that has secrets to inject (its per-sandbox CA and TLS
// termination), but every start of the binary paid for it: agentctl is also
// the sandboxes' egress proxy, where start-up time is the time until a sandbox
// has network. Linked in statically, OpenSSL's tables are ~400 KiB of data the
// loader relocates at every start (~110 extra page faults, 0.35-0.4 ms of a
// 1.9 ms start here); linked as shared libraries, loading libssl and libcrypto
// costs as much. So the binary does not link OpenSSL: openssl_on_demand.cpp
// defines each OpenSSL function agentctl and Asio's SSL layer call, with
// the prototype of OpenSSL's own header (the compiler checks each one), and
// forwards it to libssl.so.3, opened with dlopen(3) on first use
// (docs/benchmarks-history.md, "Sixth pass").
#pragma once

#include <string_view>

namespace agentctl::core {

// Opens libssl.so.3 and resolves every function agentctl calls, once per
// process. Throws agentctl::Error (what is missing, what agentctl needs it for:
// `purpose`, and the package that has it) when it cannot; after it returned,
// OpenSSL calls work.
void require_openssl(std::string_view purpose);

}  // namespace agentctl::core
