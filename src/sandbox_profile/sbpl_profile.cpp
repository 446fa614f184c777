#include "sandbox_profile/sbpl_profile.hpp"

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::sandbox_profile {
namespace {

// The socket macOS's own resolver (getaddrinfo, libinfo) talks to.
constexpr const char* k_resolver_socket = "/private/var/run/mDNSResponder";

void check_sbpl_string(const std::string& value, const char* field) {
    for (char c : value) {
        auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\' || u < 0x20 || u == 0x7f) {
            throw Error(fmt::format("cannot write the sandbox profile: {} \"{}\" contains a quote, backslash or "
                                    "control character",
                                    field, value),
                        "move Lima's home (LIMA_HOME) to a plain path");
        }
    }
}

}  // namespace

std::string generate_sbpl(const SbplOptions& options) {
    if (options.ssh_port == 0 || options.proxy_port == 0) {
        throw Error("internal error: the sandbox profile needs the SSH port and the egress proxy port");
    }
    if (options.lima_home.empty() || options.lima_home.front() != '/') {
        throw Error(fmt::format("cannot write the sandbox profile: Lima's home \"{}\" is not an absolute path",
                                options.lima_home),
                    "set LIMA_HOME to an absolute path, or unset it to use ~/.lima");
    }
    check_sbpl_string(options.lima_home, "Lima's home");
    check_sbpl_string(options.instance, "the instance name");

    std::string home = options.lima_home;
    while (home.size() > 1 && home.back() == '/') home.pop_back();

    std::string p;
    p += "(version 1)\n";
    p += fmt::format(";; agentctl: limactl start for Lima instance \"{}\".\n", options.instance);
    p += ";; Everything is allowed except outbound connections: the hostagent re-creates\n";
    p += ";; every guest connection on the host, so this is where guest egress is cut.\n";
    p += "(allow default)\n";
    p += "(deny network-outbound)\n";
    p += ";; the instance's SSH forward (limactl shell, Lima's own provisioning)\n";
    p += fmt::format("(allow network-outbound (remote ip \"localhost:{}\"))\n", options.ssh_port);
    p += ";; the instance's egress proxy, which applies the allowlist\n";
    p += fmt::format("(allow network-outbound (remote ip \"localhost:{}\"))\n", options.proxy_port);
    p += ";; the hostagent's own Unix sockets (ssh control master, ha.sock)\n";
    p += fmt::format("(allow network-outbound (remote unix-socket (subpath \"{}\")))\n", home);
    if (options.host_resolver) {
        p += ";; Lima's host resolver answers guest DNS through the system resolver\n";
        p += fmt::format("(allow network-outbound (remote unix-socket (path-literal \"{}\")))\n", k_resolver_socket);
    } else {
        p += ";; network.dns.disabled: no name lookups on the guest's behalf at all\n";
        p += fmt::format("(deny network-outbound (remote unix-socket (path-literal \"{}\")))\n", k_resolver_socket);
    }
    return p;
}

std::string compact_sbpl(const std::string& profile) {
    std::string out;
    std::size_t start = 0;
    while (start < profile.size()) {
        auto end = profile.find('\n', start);
        if (end == std::string::npos) end = profile.size();
        auto line = profile.substr(start, end - start);
        start = end + 1;
        if (line.empty() || line.rfind(";;", 0) == 0) continue;  // SBPL comments run to the end of a line
        if (!out.empty()) out += ' ';
        out += line;
    }
    return out;
}

}  // namespace agentctl::sandbox_profile
