// Incus remotes: the servers the `incus` client knows by name, read from its
// own configuration so that `agentctl --remote NAME` reaches exactly the
// server `incus NAME:...` reaches, with the same certificates.
//
// The contract, from the Incus 6.0 client (github.com/lxc/incus, branch
// stable-6.0, shared/cliconfig):
//   file.go     the directory is $INCUS_CONF, else $HOME/.config/incus; the
//               file is config.yml there, `remotes: NAME: {addr, protocol,
//               auth_type, project, public}` and `default-remote`. Remotes of
//               the system-wide $INCUS_GLOBAL_CONF/config.yml (/etc/incus)
//               are added when the user's file does not name them. The static
//               remote `local` is always the unix socket. protocol defaults
//               to `incus`.
//   config.go   ServerCertPath: servercerts/NAME.crt (in the global directory
//               for a global remote).
//   cert.go     GetClientCertificate: clientcerts/NAME.crt/.key/.ca when that
//               pair exists, else client.crt/client.key/client.ca.
//   remote.go   GetInstanceServer refuses a public or non-`incus` remote;
//               HTTPS needs a client certificate and key ("Missing TLS client
//               certificate and key").
// agentctl follows `default-remote` only when asked to (the default is the
// local unix socket), and pins more strictly than the Go client: when
// servercerts/NAME.crt exists, the server's certificate must be that very
// certificate (tls_transport.cpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace agentctl::provider::incus {

struct Remote {
    std::string name;
    std::string addr;  // as written: https://HOST[:PORT], unix://[PATH]
    std::string protocol = "incus";
    std::string auth_type;
    std::string project;
    bool is_public = false;
    bool global = false;  // from the system-wide file
};

// Where the `incus` client keeps its configuration, and the project its
// environment names.
struct IncusConfigDirs {
    std::string user;     // $INCUS_CONF, else $HOME/.config/incus
    std::string global;   // $INCUS_GLOBAL_CONF, else /etc/incus
    std::string project;  // $INCUS_PROJECT: overrides the remote's project, as for the incus client
};
// `env` maps variable names to values (nullptr = the process environment).
[[nodiscard]] IncusConfigDirs incus_config_dirs(const std::map<std::string, std::string>* env = nullptr);

// Every remote the client knows: the user's config.yml, the global one's
// remotes the user's does not name, and `local`. A malformed file throws
// agentctl::Error naming the file (and line for YAML errors).
[[nodiscard]] std::map<std::string, Remote> load_remotes(const IncusConfigDirs& dirs);

// An HTTPS remote, ready to connect: its address split, and the files of its
// certificates (the client's pair and CA, the pinned server certificate).
struct HttpsRemote {
    std::string name;
    std::string host;  // without brackets for IPv6
    std::string port;  // 8443 when the address names none
    std::string project;
    std::string client_cert;
    std::string client_key;
    std::string client_ca;    // may not exist
    std::string server_cert;  // the pin; may not exist
};

// What `--remote NAME` / `incus.remote=NAME` resolves to: the unix socket
// (`local`, or an `addr: unix://PATH` remote; `socket` empty = the usual
// search) or an HTTPS server.
struct RemoteTarget {
    std::string name;
    std::optional<std::string> socket;  // set for a unix remote
    std::optional<HttpsRemote> https;   // set for an HTTPS remote
    std::string project;
};

// Resolves a remote name. Throws agentctl::Error, exit 1, for an unknown name
// (listing the known ones and the file they come from), a public or
// non-`incus` remote, OIDC authentication, and an HTTPS remote without a client
// certificate.
[[nodiscard]] RemoteTarget resolve_remote(const std::string& name, const IncusConfigDirs& dirs);

// Splits `https://HOST[:PORT][/]`; throws agentctl::Error naming the remote
// for anything else.
struct HostPort {
    std::string host;
    std::string port;
};
[[nodiscard]] HostPort parse_https_addr(const std::string& remote, const std::string& addr);

}  // namespace agentctl::provider::incus
