// Strict profile loading: every field decoded, every problem reported at once
// with FILE:LINE:COL and the field path.
#include <catch2/catch.hpp>

#include "agentctl/error.hpp"
#include "policy/profile.hpp"
#include "support/error_text.hpp"

using namespace agentctl;
using namespace agentctl::policy;

namespace {

LoadContext context() {
    LoadContext c;
    c.home = "/home/u";
    c.read_file = [](const std::string& path) -> std::optional<std::string> {
        if (path == "/etc/agentctl/profiles/hosts.txt")
            return std::string("# mirrors\ndeb.debian.org:80,443\n\npypi.org\n");
        if (path == "/home/u/lists/bad.txt") return std::string("ok.example.com\nhttps://x.example.com/path\n");
        return std::nullopt;
    };
    return c;
}

std::vector<std::string> problems(std::string_view text) {
    std::vector<std::string> out;
    for (const auto& d : profile_diagnostics(text, "/p/x.yaml", context())) out.push_back(d.render());
    return out;
}

}  // namespace

TEST_CASE("a complete profile decodes every field", "[profile][load]") {
    auto profile = parse_profile(R"(apiVersion: agentctl.dev/v1
kind: Profile
metadata:
  name: team
  description: the team's profile
spec:
  network:
    denyLAN: true
    allow:
      - domain: api.example.com
        ports: [443]
      - domain: "*.example.org"
      - domain: https://git.example.net
    allowPresets: [apt, pypi, apt]
    allowFile: hosts.txt
    ports:
      - {host: 8080, guest: 80}
      - {host: 5353, guest: 53, protocol: udp}
    dns:
      servers: [192.0.2.53, "2001:db8::53"]
      disabled: false
  resources:
    cpuCores: 4
    memory: 8GiB
    diskSize: 40GB
  mounts:
    - hostPath: ~/src/{{.Name}}
      guestPath: /src
      writable: true
    - hostPath: /data/ref
  mountPolicy:
    allowedRoots: [~/src, /data/]
    denyPaths: [~/src/secret]
    allowHome: false
    createMissing: true
  console:
    viewer: vnc
  packages: [git, shellcheck, git]
  isolation: container
)",
                                 "/etc/agentctl/profiles/team.yaml", ProfileSource::Organisation, context());
    CHECK(profile.name == "team");
    CHECK(profile.description == "the team's profile");
    CHECK(profile.source == ProfileSource::Organisation);
    const auto& s = profile.spec;
    CHECK(s.deny_lan == true);
    REQUIRE(s.allow.size() == 5);
    CHECK(s.allow[0].entry() == "api.example.com:443");
    CHECK(s.allow[0].origin == "profile team (/etc/agentctl/profiles/team.yaml:10)");
    CHECK(s.allow[1].entry() == "*.example.org");
    CHECK(s.allow[2].entry() == "git.example.net:443");
    CHECK(s.allow[3].entry() == "deb.debian.org:80,443");
    CHECK(s.allow[3].origin == "allow file /etc/agentctl/profiles/hosts.txt:2");
    CHECK(s.allow[4].entry() == "pypi.org");
    CHECK(s.allow[4].origin == "allow file /etc/agentctl/profiles/hosts.txt:4");
    CHECK(s.allow_presets == std::vector<std::string>{"apt", "pypi"});
    CHECK(s.allow_files == std::vector<std::string>{"/etc/agentctl/profiles/hosts.txt"});
    REQUIRE(s.ports.size() == 2);
    CHECK(s.ports[0] == PortForward{"127.0.0.1", 8080, 80, "tcp"});
    CHECK(s.ports[1] == PortForward{"127.0.0.1", 5353, 53, "udp"});
    CHECK(s.dns.servers == std::vector<std::string>{"192.0.2.53", "2001:db8::53"});
    CHECK(s.dns.disabled == false);
    CHECK(s.resources.cpu_cores == 4);
    CHECK(s.resources.memory_bytes == 8ULL << 30);
    CHECK(s.resources.disk_bytes == 40000000000ULL);
    REQUIRE(s.mounts.size() == 2);
    CHECK(s.mounts[0].host_path == "~/src/{{.Name}}");
    CHECK(s.mounts[0].guest_path == "/src");
    CHECK(s.mounts[0].writable);
    CHECK(s.mounts[0].origin == "profile team (/etc/agentctl/profiles/team.yaml:27)");
    CHECK(s.mounts[1].guest_path.empty());
    CHECK_FALSE(s.mounts[1].writable);
    REQUIRE(s.mount_policy.allowed_roots.has_value());
    CHECK(*s.mount_policy.allowed_roots == std::vector<std::string>{"/home/u/src", "/data"});
    CHECK(s.mount_policy.deny_paths == std::vector<std::string>{"/home/u/src/secret"});
    CHECK(s.mount_policy.allow_home == false);
    CHECK(s.mount_policy.create_missing == true);
    CHECK(s.viewer == "vnc");
    CHECK(s.packages == std::vector<std::string>{"git", "shellcheck"});
    CHECK(s.isolation == Isolation::Container);
    CHECK(s.isolation_origin == "profile team (/etc/agentctl/profiles/team.yaml:39)");
}

TEST_CASE("an empty spec leaves every field unset", "[profile][load]") {
    auto profile =
        parse_profile("apiVersion: agentctl.dev/v1\nkind: Profile\n", "/p/bare.yaml", ProfileSource::User, context());
    CHECK(profile.name == "bare");
    CHECK_FALSE(profile.spec.deny_lan.has_value());
    CHECK_FALSE(profile.spec.mount_policy.allowed_roots.has_value());
    CHECK_FALSE(profile.spec.mount_policy.allow_home.has_value());
    CHECK_FALSE(profile.spec.isolation.has_value());
}

TEST_CASE("every problem is reported at once with file, line, column and field", "[profile][diagnostics]") {
    auto found = problems(R"(apiVersion: agentctl.dev/v1
kind: Profile
metadata:
  name: x
  colour: blue
spec:
  network:
    denyLAN: "yes"
    allow:
      - domain: example.com
        ports: [443, 70000]
      - domain: https://example.com/v1
      - ports: [1]
      - domain: a.com:443
        ports: [443]
    allowPresets: [apt, nosuch]
    ports:
      - {host: 8080, guest: 80}
      - {host: 8080, guest: 81}
      - {host: 0, guest: 80, protocol: sctp}
  resources:
    cpuCores: two
    memory: 4GB5
    diskSize: 0GiB
  mounts:
    - guestPath: relative
    - hostPath: /x
      guestPath: relative
      writable: 1
  mountPolicy:
    allowedRoots: [relative/path, ~bob/x]
    allowHome: maybe
  console:
    viewer: x11
  packages: ["bad name", "-x"]
  isolation: chroot
  extra: true
)");
    std::vector<std::string> expected = {
        "/p/x.yaml:5:3: field metadata.colour: unknown field (known fields here: name, description)",
        "/p/x.yaml:37:3: field spec.extra: unknown field (known fields here: network, resources, mounts, mountPolicy, "
        "console, packages, isolation, secrets)",
        "/p/x.yaml:8:14: field spec.network.denyLAN: must be true or false, got \"yes\"",
        "/p/x.yaml:11:22: field spec.network.allow[0].ports[1]: must be between 1 and 65535, got 70000",
        "/p/x.yaml:12:17: field spec.network.allow[1].domain: invalid allow entry \"https://example.com/v1\": a URL "
        "with a "
        "path, query or fragment cannot be enforced: filtering is by host and port only",
        "/p/x.yaml:13:9: field spec.network.allow[2].domain: is required",
        "/p/x.yaml:14:17: field spec.network.allow[3].domain: names ports itself and in ports: give them in one place",
        "/p/x.yaml:16:25: field spec.network.allowPresets[1]: unknown preset \"nosuch\" (known: apt, apk, pypi, npm, "
        "github, "
        "gitlab)",
        "/p/x.yaml:19:9: field spec.network.ports[1]: host port 8080/tcp is already forwarded",
        "/p/x.yaml:20:16: field spec.network.ports[2].host: must be between 1 and 65535, got 0",
        "/p/x.yaml:20:40: field spec.network.ports[2].protocol: must be tcp or udp, got \"sctp\"",
        "/p/x.yaml:22:15: field spec.resources.cpuCores: must be a whole number, got \"two\"",
        "/p/x.yaml:23:13: field spec.resources.memory: \"4GB5\" is not a size above 0 such as 4GiB, 512MiB or 20GB",
        "/p/x.yaml:24:15: field spec.resources.diskSize: \"0GiB\" is not a size above 0 such as 4GiB, 512MiB or 20GB",
        "/p/x.yaml:26:7: field spec.mounts[0].hostPath: is required",
        "/p/x.yaml:28:18: field spec.mounts[1].guestPath: must be an absolute path, got \"relative\"",
        "/p/x.yaml:29:17: field spec.mounts[1].writable: must be true or false, got \"1\"",
        "/p/x.yaml:31:20: field spec.mountPolicy.allowedRoots[0]: must be an absolute path (or start with ~/), got "
        "\"relative/path\"",
        "/p/x.yaml:31:35: field spec.mountPolicy.allowedRoots[1]: \"~bob/x\": only ~ and ~/ are expanded, not ~user",
        "/p/x.yaml:32:16: field spec.mountPolicy.allowHome: must be true or false, got \"maybe\"",
        "/p/x.yaml:34:13: field spec.console.viewer: must be spice, vnc or native, got \"x11\"",
        "/p/x.yaml:35:14: field spec.packages[0]: \"bad name\" is not a package name ([A-Za-z0-9][A-Za-z0-9._+-]*)",
        "/p/x.yaml:35:26: field spec.packages[1]: \"-x\" is not a package name ([A-Za-z0-9][A-Za-z0-9._+-]*)",
        "/p/x.yaml:36:14: field spec.isolation: must be vm or container, got \"chroot\"",
    };
    CHECK(found == expected);
}

TEST_CASE("the error thrown lists every diagnostic", "[profile][diagnostics]") {
    try {
        (void)parse_profile("apiVersion: agentctl.dev/v2\nkind: Profile\nspec:\n  resources: {cpuCores: 0}\n",
                            "/p/y.yaml", ProfileSource::User, context());
        FAIL("no error");
    } catch (const Error& error) {
        CHECK(std::string(error.what()) ==
              "/p/y.yaml is invalid (2 problems):\n"
              "  /p/y.yaml:1:13: field apiVersion: must be agentctl.dev/v1, got \"agentctl.dev/v2\"\n"
              "  /p/y.yaml:4:25: field spec.resources.cpuCores: must be between 1 and 1024, got 0");
        CHECK(error.hint() == "fix the fields named above; nothing was applied");
    }
}

TEST_CASE("header, YAML and structural problems", "[profile][diagnostics]") {
    CHECK(problems("kind: Profile\n") ==
          std::vector<std::string>{"/p/x.yaml:1:1: field apiVersion: is required (apiVersion: agentctl.dev/v1)"});
    CHECK(problems("apiVersion: agentctl.dev/v1\nkind: Spec\n") ==
          std::vector<std::string>{"/p/x.yaml:2:7: field kind: must be Profile here, got \"Spec\""});
    CHECK(problems("apiVersion: agentctl.dev/v1\nkind: Profile\nspec: [1]\n") ==
          std::vector<std::string>{"/p/x.yaml:3:7: field spec: must be a mapping, got a list"});
    CHECK(problems("apiVersion: agentctl.dev/v1\nkind: Profile\nkind: Profile\n") ==
          std::vector<std::string>{"/p/x.yaml:3:1: field kind: appears twice"});
    CHECK(
        problems(
            "apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network:\n    denyLAN: true\n    denyLAN: false\n") ==
        std::vector<std::string>{"/p/x.yaml:6:5: field spec.network.denyLAN: appears twice"});
    CHECK(problems("a: [1, 2\n") ==
          std::vector<std::string>{"/p/x.yaml:2:1: YAML syntax error: end of sequence flow not found"});
    CHECK(problems("- 1\n") == std::vector<std::string>{"/p/x.yaml:1:1: must be a mapping, got a list"});
    CHECK(problems("") == std::vector<std::string>{
                              "/p/x.yaml:1:1: the file is empty; a profile starts with apiVersion: agentctl.dev/v1"});
    const std::vector<std::string> not_one = {
        "/p/x.yaml:1:1: expected exactly one YAML document (found more, or a stray ',' outside a [ ] or { } list)"};
    CHECK(problems("a: 1\n---\nb: 2\n") == not_one);
    // yaml-cpp alone never returns on these (found by fuzzing)
    CHECK(problems(", one writable workspace\nspec:\n  net") == not_one);
    CHECK(problems("[a]\n,") == not_one);
    CHECK(problems("\"x\" ,") == not_one);
    CHECK(problems("apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network:\n    allow:\n      - domain: "
                   "*.example.com\n") ==
          std::vector<std::string>{"/p/x.yaml:6:17: YAML syntax error: the referenced anchor is not defined (a value "
                                   "starting with '*' must be quoted, e.g. \"*.example.com\")"});
    CHECK(problems("apiVersion: agentctl.dev/v1\nkind: Profile\nmetadata: &m {name: x}\nspec: *m\n") ==
          std::vector<std::string>{"/p/x.yaml:4:7: YAML aliases (*name) are not accepted in profiles; a value starting "
                                   "with '*' must be quoted, e.g. \"*.example.com\""});
    CHECK(problems(std::string(100, '[')) ==
          std::vector<std::string>{"/p/x.yaml:1:1: the document nests deeper than 64 levels"});
}

TEST_CASE("a quoted true is a string, not a boolean", "[profile][diagnostics]") {
    CHECK(problems("apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network:\n    denyLAN: \"true\"\n") ==
          std::vector<std::string>{"/p/x.yaml:5:14: field spec.network.denyLAN: must be true or false, got \"true\""});
}

TEST_CASE("an allow file problem names the profile field and the file line", "[profile][diagnostics]") {
    CHECK(
        problems("apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network:\n    allowFile: ~/lists/bad.txt\n") ==
        std::vector<std::string>{"/p/x.yaml:5:16: field spec.network.allowFile: /home/u/lists/bad.txt:2: invalid allow "
                                 "entry \"https://x.example.com/path\": a URL with a path, query or fragment cannot be "
                                 "enforced: filtering is by host and port only"});
    CHECK(problems("apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network:\n    allowFile: missing.txt\n") ==
          std::vector<std::string>{
              "/p/x.yaml:5:16: field spec.network.allowFile: allow file /p/missing.txt does not exist"});
}

TEST_CASE("a Spec document names image, profiles and overrides", "[profile][spec]") {
    auto document = parse_spec_document(R"(apiVersion: agentctl.dev/v1
kind: Spec
spec:
  image: images:debian/12
  profiles: [default, strict]
  overrides:
    network:
      allow:
        - domain: api.example.com
    resources:
      memory: 6GiB
)",
                                        "/w/sandbox.yaml", context());
    CHECK(document.image == "images:debian/12");
    CHECK(document.profiles == std::vector<std::string>{"default", "strict"});
    REQUIRE(document.overrides.allow.size() == 1);
    CHECK(document.overrides.allow[0].origin == "spec /w/sandbox.yaml (/w/sandbox.yaml:9)");
    CHECK(document.overrides.resources.memory_bytes == 6ULL << 30);
    try {
        (void)parse_spec_document("apiVersion: agentctl.dev/v1\nkind: Spec\nspec:\n  image: [x]\n  profile: a\n",
                                  "/w/s.yaml", context());
        FAIL("no error");
    } catch (const Error& error) {
        CHECK(std::string(error.what()) ==
              "/w/s.yaml is invalid (2 problems):\n"
              "  /w/s.yaml:5:3: field spec.profile: unknown field (known fields here: image, profiles, overrides)\n"
              "  /w/s.yaml:4:10: field spec.image: must be a string, got a list");
    }
}

TEST_CASE("sizes", "[profile][units]") {
    CHECK(parse_size("4GiB") == 4ULL << 30);
    CHECK(parse_size("512MiB") == 512ULL << 20);
    CHECK(parse_size("1TiB") == 1ULL << 40);
    CHECK(parse_size("3KiB") == 3072);
    CHECK(parse_size("20GB") == 20000000000ULL);
    CHECK(parse_size("5KB") == 5000);
    CHECK(parse_size("7MB") == 7000000);
    CHECK(parse_size("2TB") == 2000000000000ULL);
    CHECK(parse_size("1048576") == 1048576);
    CHECK(parse_size("100B") == 100);
    for (const char* bad : {"", "0", "0GiB", "GiB", "4 GiB", "4gib", "1.5GiB", "-1GiB", "4GiBs", "99999999999TiB",
                            "18446744073709551616"}) {
        INFO(bad);
        CHECK_FALSE(parse_size(bad).has_value());
    }
}

TEST_CASE("port flags with listen address, ports and protocol", "[profile][units]") {
    CHECK(parse_port_flag("8080:80") == PortForward{"127.0.0.1", 8080, 80, "tcp"});
    CHECK(parse_port_flag("5353:53/udp") == PortForward{"127.0.0.1", 5353, 53, "udp"});
    CHECK(parse_port_flag("0.0.0.0:8080:80/tcp") == PortForward{"0.0.0.0", 8080, 80, "tcp"});
    CHECK(parse_port_flag("[::1]:8080:80") == PortForward{"::1", 8080, 80, "tcp"});
    auto error_of = [](std::string_view text) { return test::error_of([&] { (void)parse_port_flag(text); }); };
    CHECK(error_of("8080") == "invalid --port \"8080\": it needs HOST_PORT:GUEST_PORT");
    CHECK(error_of("8080:0") == "invalid --port \"8080:0\": ports are whole numbers from 1 to 65535");
    CHECK(error_of("70000:80") == "invalid --port \"70000:80\": ports are whole numbers from 1 to 65535");
    CHECK(error_of("8080:80/sctp") == "invalid --port \"8080:80/sctp\": protocol \"sctp\" is not tcp or udp");
    CHECK(error_of("localhost:8080:80") ==
          "invalid --port \"localhost:8080:80\": listen address \"localhost\" is not an IP address in dotted or IPv6 "
          "form");
    CHECK(error_of("127.1:8080:80") ==
          "invalid --port \"127.1:8080:80\": listen address \"127.1\" is not an IP address in dotted or IPv6 form");
}

TEST_CASE("resources.processes: a process limit from 1 to 1000000", "[profile][load]") {
    auto ok = parse_profile("apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  resources: {processes: 300}\n",
                            "/p/z.yaml", ProfileSource::User, context());
    CHECK(ok.spec.resources.processes == 300);
    try {
        (void)parse_profile("apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  resources: {processes: 0}\n",
                            "/p/z.yaml", ProfileSource::User, context());
        FAIL("no error");
    } catch (const Error& error) {
        CHECK_THAT(std::string(error.what()),
                   Catch::Contains("/p/z.yaml:4:26: field spec.resources.processes: must be between 1 and 1000000, "
                                   "got 0"));
    }
}

TEST_CASE("secrets: bindings and forbids decode, every problem named by file, line and field", "[profile][secret]") {
    auto profile = parse_profile(R"(apiVersion: agentctl.dev/v1
kind: Profile
spec:
  secrets:
    bind:
      - name: github
      - name: internal
        env: INTERNAL_TOKEN
        hosts:
          - host: API.Example.test
            header: X-Api-Key
    forbid:
      - secret: github
        host: Gist.GitHub.com
      - {secret: "*", host: paste.example.test}
)",
                                 "/org/team.yaml", ProfileSource::Organisation, context());
    const auto& bind = profile.spec.secrets;
    REQUIRE(bind.size() == 2);
    CHECK(bind[0].name == "github");
    CHECK(bind[0].env.empty());
    CHECK(bind[0].hosts.empty());
    CHECK(bind[0].origin == "profile team (/org/team.yaml:6) spec.secrets.bind[0]");
    CHECK(bind[1].env == "INTERNAL_TOKEN");
    CHECK(bind[1].hosts == std::vector<SecretHost>{{"api.example.test", "x-api-key"}});
    const auto& forbid = profile.spec.secret_forbids;
    REQUIRE(forbid.size() == 2);
    CHECK(forbid[0].secret == "github");
    CHECK(forbid[0].host == "gist.github.com");
    CHECK(forbid[0].origin == "profile team (/org/team.yaml:13) spec.secrets.forbid[0]");
    CHECK(forbid[1].secret == "*");

    auto found = problems(R"(apiVersion: agentctl.dev/v1
kind: Profile
spec:
  secrets:
    bind:
      - env: X
      - name: ../up
      - name: ok
        env: SSL_CERT_FILE
      - name: ok2
        hosts:
          - host: api.example.test:443
            header: "bad header"
      - {name: ok3, colour: red}
    forbid:
      - secret: github
      - {secret: github, host: a.test/x}
    unbind: []
)");
    std::vector<std::string> expected = {
        "/p/x.yaml:18:5: field spec.secrets.unbind: unknown field (known fields here: bind, forbid)",
        "/p/x.yaml:6:9: field spec.secrets.bind[0].name: is required",
        "/p/x.yaml:7:15: field spec.secrets.bind[1].name: invalid secret name \"../up\": use a letter or digit "
        "followed by letters, digits, '_', '.' or '-' (at most 64), e.g. github",
        "/p/x.yaml:9:14: field spec.secrets.bind[2].env: agentctl sets SSL_CERT_FILE in the sandbox itself (where "
        "programs find the sandbox CA: /etc/ssl/certs/ca-certificates.crt)",
        "/p/x.yaml:12:19: field spec.secrets.bind[3].hosts[0].host: \"api.example.test:443\" is not a host name (no "
        "port or path: secrets go to port 443)",
        "/p/x.yaml:13:21: field spec.secrets.bind[3].hosts[0].header: \"bad header\" is not an HTTP header name (e.g. "
        "authorization)",
        "/p/x.yaml:14:21: field spec.secrets.bind[4].colour: unknown field (known fields here: name, env, hosts)",
        "/p/x.yaml:16:9: field spec.secrets.forbid[0].host: is required",
        "/p/x.yaml:17:32: field spec.secrets.forbid[1].host: \"a.test/x\" is not a host name (no port or path: "
        "secrets go to port 443)",
    };
    CHECK(found == expected);
}
