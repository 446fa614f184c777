// Incus remotes: the incus client's config.yml read as its Go code reads it
// (shared/cliconfig), resolving a name to a socket or an HTTPS server with its
// certificate files, the one decision whether a server is this machine, the
// preview lines addressed to a remote, and refusing host mounts on a server
// that is not this machine.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "agentctl/error.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/lifecycle/incus_provider.hpp"
#include "provider/incus/client/remote.hpp"
#include "provider/incus/client/server.hpp"
#include "support/fake_resolver.hpp"
#include "support/error_text.hpp"
#include "support/provider_context.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;
namespace fs = std::filesystem;

namespace {

// A scratch incus client configuration: user and global directories.
struct ConfigDirs {
    ConfigDirs() {
        root = fs::temp_directory_path() /
               ("agentctl-remote-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        fs::remove_all(root);
        fs::create_directories(root / "user" / "servercerts");
        fs::create_directories(root / "global" / "servercerts");
        dirs.user = (root / "user").string();
        dirs.global = (root / "global").string();
    }
    ~ConfigDirs() { fs::remove_all(root); }
    void write(const fs::path& relative, const std::string& text) const {
        fs::create_directories((root / relative).parent_path());
        std::ofstream(root / relative) << text;
    }
    void client_pair() const {
        write("user/client.crt", "cert");
        write("user/client.key", "key");
    }
    static inline int counter = 0;
    fs::path root;
    IncusConfigDirs dirs;
};

}  // namespace

TEST_CASE("the incus client's directories: $INCUS_CONF, else ~/.config/incus; /etc/incus globally", "[remote]") {
    std::map<std::string, std::string> env{{"HOME", "/home/dev"}};
    CHECK(incus_config_dirs(&env).user == "/home/dev/.config/incus");
    CHECK(incus_config_dirs(&env).global == "/etc/incus");
    env["INCUS_CONF"] = "/srv/incus-client";
    env["INCUS_GLOBAL_CONF"] = "/srv/incus-global";
    CHECK(incus_config_dirs(&env).user == "/srv/incus-client");
    CHECK(incus_config_dirs(&env).global == "/srv/incus-global");
}

TEST_CASE("config.yml: remotes with their defaults, global ones added, local always the socket", "[remote]") {
    ConfigDirs c;
    c.write("user/config.yml",
            "default-remote: build\n"
            "remotes:\n"
            "  build:\n    addr: https://build.example:8443\n    auth_type: tls\n    project: agents\n"
            "  images:\n    addr: https://images.linuxcontainers.org\n    protocol: simplestreams\n"
            "    public: true\n"
            "  local:\n    addr: https://pretending.example\n    project: mine\n");
    c.write("global/config.yml",
            "remotes:\n  shared:\n    addr: https://shared.example\n  build:\n    addr: https://other.example\n");
    const auto remotes = load_remotes(c.dirs);
    REQUIRE(remotes.size() == 4);
    CHECK(remotes.at("build").addr == "https://build.example:8443");
    CHECK(remotes.at("build").protocol == "incus");  // the default
    CHECK(remotes.at("build").project == "agents");
    CHECK_FALSE(remotes.at("build").global);  // the user's file wins
    CHECK(remotes.at("shared").global);
    CHECK(remotes.at("images").is_public);
    CHECK(remotes.at("local").addr == "unix://");  // static: only its project may be set
    CHECK(remotes.at("local").project == "mine");
}

TEST_CASE("a malformed config.yml is an error naming the file and line", "[remote]") {
    ConfigDirs c;
    c.write("user/config.yml", "remotes:\n  build: [unclosed\n");
    CHECK_THAT(test::error_and_hint_of([&] { (void)load_remotes(c.dirs); }), Catch::Contains("user/config.yml:"));
    c.write("user/config.yml", "remotes:\n  build: just-a-string\n");
    CHECK_THAT(test::error_and_hint_of([&] { (void)load_remotes(c.dirs); }),
               Catch::Contains("user/config.yml:2: remote \"build\" must be a mapping"));
}

TEST_CASE("resolving a remote: the HTTPS address and the certificate files the incus client uses", "[remote]") {
    ConfigDirs c;
    c.client_pair();
    c.write("user/config.yml",
            "remotes:\n  build:\n    addr: https://build.example\n    project: agents\n"
            "  multi:\n    addr: https://a.example:9000, https://b.example:9000\n"
            "  v6:\n    addr: https://[fd00::5]:9443/\n  default-project:\n    addr: https://x.example\n"
            "    project: default\n  sock:\n    addr: unix:///srv/incus/unix.socket\n");
    c.write("global/config.yml", "remotes:\n  shared:\n    addr: https://shared.example:8443\n");
    const auto build = resolve_remote("build", c.dirs);
    REQUIRE(build.https);
    CHECK(build.https->host == "build.example");
    CHECK(build.https->port == "8443");
    CHECK(build.project == "agents");
    CHECK(build.https->client_cert == c.dirs.user + "/client.crt");
    CHECK(build.https->client_key == c.dirs.user + "/client.key");
    CHECK(build.https->server_cert == c.dirs.user + "/servercerts/build.crt");
    const auto v6 = resolve_remote("v6", c.dirs);
    CHECK(v6.https->host == "fd00::5");
    CHECK(v6.https->port == "9443");
    CHECK(resolve_remote("default-project", c.dirs).project.empty());
    CHECK(resolve_remote("multi", c.dirs).https->host == "a.example");  // the first of several
    // A global remote's pinned certificate is in the global directory (config.go, ServerCertPath).
    CHECK(resolve_remote("shared", c.dirs).https->server_cert == c.dirs.global + "/servercerts/shared.crt");
    // A remote's own client pair wins (cert.go, GetClientCertificate).
    c.write("user/clientcerts/build.crt", "cert");
    c.write("user/clientcerts/build.key", "key");
    CHECK(resolve_remote("build", c.dirs).https->client_cert == c.dirs.user + "/clientcerts/build.crt");
    const auto sock = resolve_remote("sock", c.dirs);
    CHECK_FALSE(sock.https);
    CHECK(sock.socket == "/srv/incus/unix.socket");
    CHECK(resolve_remote("local", c.dirs).socket == "");
}

TEST_CASE("remotes agentctl cannot use are refused with what to do", "[remote]") {
    ConfigDirs c;
    c.write("user/config.yml",
            "remotes:\n  build:\n    addr: https://build.example\n"
            "  images:\n    addr: https://images.example\n    protocol: simplestreams\n    public: true\n"
            "  sso:\n    addr: https://sso.example\n    auth_type: oidc\n"
            "  bad:\n    addr: http://plain.example\n");
    const auto unknown = test::error_and_hint_of([&] { (void)resolve_remote("nosuch", c.dirs); });
    CHECK_THAT(unknown, Catch::Contains("unknown Incus remote \"nosuch\" (known: bad, build, local, sso; from " +
                                        c.dirs.user + "/config.yml)"));
    CHECK_THAT(unknown, Catch::Contains("incus remote add nosuch https://HOST:8443"));
    CHECK_THAT(test::error_and_hint_of([&] { (void)resolve_remote("images", c.dirs); }),
               Catch::Contains("is an image server (public), not an Incus server"));
    CHECK_THAT(test::error_and_hint_of([&] { (void)resolve_remote("sso", c.dirs); }), Catch::Contains("OIDC"));
    const auto missing = test::error_and_hint_of([&] { (void)resolve_remote("build", c.dirs); });
    CHECK_THAT(missing, Catch::Contains("needs a TLS client certificate and key: " + c.dirs.user + "/client.crt"));
    CHECK_THAT(missing, Catch::Contains("incus config trust add-certificate"));
    c.client_pair();
    CHECK_THAT(test::error_and_hint_of([&] { (void)resolve_remote("bad", c.dirs); }),
               Catch::Contains("is not an https:// URL"));
}

TEST_CASE("https addresses: host, port 8443 by default, IPv6 in brackets, nothing else", "[remote]") {
    CHECK(parse_https_addr("r", "https://10.0.0.5").port == "8443");
    CHECK(parse_https_addr("r", "https://10.0.0.5:9000").host == "10.0.0.5");
    CHECK(parse_https_addr("r", "https://[::1]:8443").host == "::1");
    CHECK_THROWS_WITH(parse_https_addr("r", "https://host/1.0"), Catch::Contains("has a path"));
    CHECK_THROWS_WITH(parse_https_addr("r", "https://host:99999"), Catch::Contains("bad port"));
    CHECK_THROWS_WITH(parse_https_addr("r", "https://:8443"), Catch::Contains("names no host"));
    CHECK_THROWS_WITH(parse_https_addr("r", "https://[::1:8443"), Catch::Contains("unclosed"));
}

TEST_CASE("is this machine: loopback or this host's own addresses, every address of the name", "[remote]") {
    test::FakeResolver resolver;
    resolver.table["localhost"] = {"127.0.0.1", "::1"};
    resolver.table["me"] = {"192.0.2.10"};
    resolver.table["far"] = {"198.51.100.7"};
    resolver.table["split"] = {"192.0.2.10", "198.51.100.7"};
    const std::vector<policy::IpAddress> own{*policy::parse_ip_literal("192.0.2.10")};
    CHECK(is_this_machine("127.0.0.1", resolver, own));
    CHECK(is_this_machine("::1", resolver, own));
    CHECK(is_this_machine("localhost", resolver, own));
    CHECK(is_this_machine("192.0.2.10", resolver, own));
    CHECK(is_this_machine("me", resolver, own));
    CHECK_FALSE(is_this_machine("far", resolver, own));
    CHECK_FALSE(is_this_machine("198.51.100.7", resolver, own));
    CHECK_FALSE(is_this_machine("split", resolver, own));         // it may connect elsewhere
    CHECK_FALSE(is_this_machine("unresolvable", resolver, own));  // unknown: not here
}

TEST_CASE("the server chosen by incus.remote: none is the local socket", "[remote]") {
    ConfigDirs c;
    c.client_pair();
    c.write("user/config.yml", "remotes:\n  lo:\n    addr: https://127.0.0.1:8443\n    project: p1\n");
    const auto local = locate_server({}, c.dirs);
    CHECK(local.remote.empty());
    CHECK(local.socket);
    CHECK(local.this_machine);
    const auto lo = locate_server({{"incus.remote", "lo"}}, c.dirs);
    CHECK(lo.remote == "lo");
    REQUIRE(lo.https);
    CHECK(lo.project == "p1");
    CHECK(lo.this_machine);
    CHECK(lo.describe() == "remote lo at https://127.0.0.1:8443 (this machine), project p1");
}

TEST_CASE("the project: --project or incus.project, else $INCUS_PROJECT, else the remote's", "[remote]") {
    ConfigDirs c;
    c.client_pair();
    c.write("user/config.yml", "remotes:\n  lo:\n    addr: https://127.0.0.1:8443\n    project: p1\n");
    CHECK(locate_server({{"incus.remote", "lo"}}, c.dirs).project == "p1");
    CHECK(locate_server({}, c.dirs).project.empty());  // the local socket's default project

    std::map<std::string, std::string> env{{"HOME", "/home/dev"}, {"INCUS_PROJECT", "from-env"}};
    CHECK(incus_config_dirs(&env).project == "from-env");
    auto dirs = c.dirs;
    dirs.project = "from-env";
    CHECK(locate_server({{"incus.remote", "lo"}}, dirs).project == "from-env");
    CHECK(locate_server({}, dirs).project == "from-env");
    CHECK(locate_server({}, dirs).describe().ends_with(", project from-env"));
    const auto chosen = locate_server({{"incus.remote", "lo"}, {"incus.project", "chosen"}}, dirs);
    CHECK(chosen.project == "chosen");
    // `default` is Incus's default project: no ?project= at all.
    CHECK(locate_server({{"incus.project", "default"}}, dirs).project.empty());

    dirs.project = "no/such";
    CHECK_THROWS_WITH(locate_server({}, dirs), Catch::Contains("INCUS_PROJECT must be the name of an Incus project"));
}

TEST_CASE("preview lines address the remote the way the incus client does (REMOTE:/1.0/...)", "[remote]") {
    Json body{{"action", "stop"}};
    CHECK(query_argv("PUT", "/1.0/instances/tbox/state", &body, "agents", "build") ==
          std::vector<std::string>{"incus", "query", "-X", "PUT", "--data", R"({"action":"stop"})",
                                   "build:/1.0/instances/tbox/state?project=agents"});
    // Runnable as printed: `incus query` refuses --project, so the project is in the path.
    CHECK(query_argv("GET", "/1.0/instances?recursion=1", nullptr, "agents", "") ==
          std::vector<std::string>{"incus", "query", "-X", "GET", "/1.0/instances?recursion=1&project=agents"});
    test::ProviderContextFixture<> f({.preview = true});
    auto [out, context, reporter] = std::tie(f.out, f.context, f.reporter);
    Server server;
    server.remote = "build";
    auto provider = make_provider(context, make_preview_client(out, {}, nullptr, "build"), nullptr, server);
    provider->lifecycle().stop("tbox", StopRequest{});
    CHECK_THAT(out.str(), Catch::StartsWith("incus query -X GET build:/1.0/instances/tbox\n"));
    std::ostringstream().swap(out);
    provider->commands()->shell("tbox", true);
    CHECK_THAT(out.str(), Catch::Contains("\nincus exec build:tbox --env HOME=/root"));
}

TEST_CASE("a server that is not this machine: host directories are refused, --mount-none is fine", "[remote]") {
    test::ProviderContextFixture<> f({.preview = true});
    auto [out, context, reporter] = std::tie(f.out, f.context, f.reporter);
    Server server;
    server.remote = "far";
    server.this_machine = false;
    auto provider = make_provider(context, make_preview_client(out, {}, nullptr, "far"), nullptr, server);
    SandboxSpec spec;
    spec.name = "tbox";
    spec.image = "agentctl-debian-12";
    spec.isolation = Isolation::Container;
    Mount mount;
    mount.host_path = "/home/dev/project";
    mount.guest_path = "/workspace";
    spec.mounts.push_back(mount);
    const auto refused = test::error_and_hint_of([&] { provider->lifecycle().create(spec); });
    CHECK_THAT(refused, Catch::Contains("the Incus server of remote far is not this machine, so host directories "
                                        "cannot be mounted: /home/dev/project would be a path on the server"));
    CHECK_THAT(refused, Catch::Contains("--mount-none"));
    CHECK_THAT(out.str(), !Catch::Contains("-X POST"));  // nothing was made
    spec.mounts.clear();
    provider->lifecycle().create(spec);
    CHECK_THAT(out.str(), Catch::Contains("far:/1.0/instances\n"));
    StartRequest start;
    start.mounts = std::vector<Mount>{mount};
    CHECK_THAT(test::error_and_hint_of([&] { provider->lifecycle().start("tbox", start); }),
               Catch::Contains("is not this machine"));
}
