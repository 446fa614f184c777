#include "provider/incus/network/proxy_instance.hpp"

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "egress_proxy/proxy_arguments.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/client/payloads.hpp"

namespace agentctl::provider::incus {

std::string companion_policy_path() { return std::string(k_companion_etc) + "/policy.json"; }
std::string companion_resolve_path() { return std::string(k_companion_etc) + "/resolve"; }
std::string companion_log_path() { return std::string(k_companion_run) + "/egress.log"; }
std::string companion_unit_upload_path() { return std::string(k_companion_etc) + "/unit.new"; }

Json companion_payload(const EgressSite& site, const std::string& pool, const CompanionLimits& limits) {
    const auto address = proxy_address(ProxyPlacement::Instance, site.subnet);
    Json config{
        {"limits.cpu", std::string(k_companion_cpu)},
        {"limits.memory", std::string(k_companion_memory)},
        {"limits.processes", std::string(k_companion_processes)},
        {"security.idmap.isolated", "true"},
        {"security.guestapi", "false"},
        {"security.nesting", "false"},
        {"security.privileged", "false"},
        // The address before init runs; no IPv6 and no router advertisements
        // (nothing on the bridge can give the companion another route).
        {"raw.lxc", fmt::format("lxc.net.0.ipv4.address = {}\nlxc.net.0.ipv4.gateway = {}\n"
                                "lxc.sysctl.net.ipv6.conf.all.disable_ipv6 = 1\n"
                                "lxc.sysctl.net.ipv6.conf.default.disable_ipv6 = 1\n"
                                "lxc.cgroup.memory.kmem.tcp.limit_in_bytes = {}\n",
                                address.to_string(), site.subnet.host(1).address_text(), limits.socket_memory_bytes)},
        {std::string(key::k_managed), "true"},
        {std::string(key::k_role), std::string(key::k_role_egress_proxy)},
        {std::string(key::k_sandbox), site.sandbox},
        {std::string(key::k_image), site.image},
    };
    Json devices{
        {"root", {{"type", "disk"}, {"path", "/"}, {"pool", pool}}},
        {"eth0",
         {{"type", "nic"},
          {"name", "eth0"},
          {"network", site.bridge},
          {"ipv4.address", address.address_text()},
          {"security.mac_filtering", "true"},
          {"security.ipv4_filtering", "true"}}},
    };
    devices[std::string(k_companion_server_routes_device)] = server_routes_device();
    Json source{{"type", "image"}};
    source[is_image_fingerprint(site.image) ? "fingerprint" : "alias"] = site.image;
    return Json{{"name", companion_name(site.sandbox)},
                {"type", "container"},
                {"source", std::move(source)},
                {"profiles", Json::array()},  // nothing from the default profile: no mounts, no other NIC
                {"config", std::move(config)},
                {"devices", std::move(devices)},
                {"start", true},
                {"description", fmt::format("agentctl egress proxy of sandbox {}", site.sandbox)}};
}

ConfigMap server_routes_device() {
    return ConfigMap{{"type", "disk"},
                     {"source", std::string(k_server_fib_trie)},
                     {"path", std::string(k_companion_server_routes)},
                     {"readonly", "true"}};
}

namespace {

// %XX escapes of a URL path segment or query value, decoded.
std::string url_decode(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '%' && i + 2 < text.size()) {
            const auto hex = std::string(text.substr(i + 1, 2));
            char* end = nullptr;
            const long value = std::strtol(hex.c_str(), &end, 16);
            if (end == hex.c_str() + 2) {
                out.push_back(static_cast<char>(value));
                i += 2;
                continue;
            }
        }
        out.push_back(text[i]);
    }
    return out;
}

}  // namespace

std::vector<std::string> bridge_strangers(const Json& network, const std::string& sandbox, const std::string& project) {
    std::vector<std::string> out;
    const auto used_by = network.find("used_by");
    if (used_by == network.end() || !used_by->is_array()) return out;
    const std::string ours = project.empty() ? "default" : project;
    for (const auto& item : *used_by) {
        if (!item.is_string()) continue;
        std::string_view url = item.get_ref<const std::string&>();
        std::string query;
        if (const auto mark = url.find('?'); mark != std::string_view::npos) {
            query = std::string(url.substr(mark + 1));
            url = url.substr(0, mark);
        }
        std::string in_project = "default";
        for (std::size_t start = 0; start < query.size();) {
            auto end = query.find('&', start);
            if (end == std::string::npos) end = query.size();
            const auto pair = std::string_view(query).substr(start, end - start);
            if (pair.starts_with("project=")) in_project = url_decode(pair.substr(8));
            start = end + 1;
        }
        // /1.0/KIND/NAME
        constexpr std::string_view k_prefix = "/1.0/";
        if (!url.starts_with(k_prefix)) {
            out.emplace_back(url);
            continue;
        }
        const auto rest = url.substr(k_prefix.size());
        const auto slash = rest.find('/');
        auto kind = std::string(rest.substr(0, slash));
        const auto name = slash == std::string_view::npos ? std::string() : url_decode(rest.substr(slash + 1));
        if (kind == "instances" && in_project == ours && (name == sandbox || name == companion_name(sandbox))) {
            continue;
        }
        if (kind.ends_with('s')) kind.pop_back();
        out.push_back(fmt::format("{} {}{}", kind, name,
                                  in_project == ours ? std::string() : fmt::format(" (project {})", in_project)));
    }
    return out;
}

Bundle parse_ldd(const std::string& executable, const std::string& ldd_output) {
    Bundle bundle;
    bundle.executable = executable;
    if (ldd_output.find("not a dynamic executable") != std::string::npos ||
        ldd_output.find("statically linked") != std::string::npos) {
        return bundle;
    }
    std::istringstream lines(ldd_output);
    std::string line;
    while (std::getline(lines, line)) {
        const auto arrow = line.find("=>");
        std::string path;
        if (arrow != std::string::npos) {
            std::istringstream rest(line.substr(arrow + 2));
            rest >> path;
            if (path == "not") {
                std::istringstream name(line);
                std::string library;
                name >> library;
                throw Error(fmt::format("agentctl's binary needs {}, which ldd cannot find", library),
                            "install the library, or build agentctl statically (the release build is)");
            }
        } else {
            std::istringstream fields(line);
            fields >> path;
        }
        if (path.empty() || path.front() != '/') continue;  // linux-vdso.so.1: in the kernel
        const auto base = std::filesystem::path(path).filename().string();
        if (arrow == std::string::npos && base.starts_with("ld-linux")) {
            bundle.loader = path;
        } else {
            bundle.libraries.push_back(path);
        }
    }
    return bundle;
}

std::map<std::string, std::string> bundle_files(const Bundle& bundle) {
    std::map<std::string, std::string> files{{bundle.executable, std::string(k_companion_bin)}};
    auto lib = [](const std::string& path) {
        return std::string(k_companion_lib) + "/" + std::filesystem::path(path).filename().string();
    };
    if (!bundle.loader.empty()) files[bundle.loader] = lib(bundle.loader);
    for (const auto& library : bundle.libraries) files[library] = lib(library);
    return files;
}

std::vector<std::string> companion_command(const Bundle& bundle, const EgressSite& site, bool resolve_file,
                                           const CompanionLimits& limits) {
    std::vector<std::string> argv;
    if (!bundle.loader.empty()) {
        argv = {std::string(k_companion_lib) + "/" + std::filesystem::path(bundle.loader).filename().string(),
                "--library-path", std::string(k_companion_lib)};
    }
    egress_proxy::ProxyOptions proxy;
    proxy.listen =
        fmt::format("{}:{}", proxy_address(ProxyPlacement::Instance, site.subnet).address_text(), k_egress_proxy_port);
    proxy.policy_file = companion_policy_path();
    proxy.log_file = companion_log_path();
    proxy.sandbox_name = site.sandbox;
    proxy.companion = true;
    proxy.server_routes = std::string(k_companion_server_routes);
    proxy.limits.max_tunnels = limits.max_tunnels;
    if (resolve_file) proxy.resolve_file = companion_resolve_path();
    const auto command = egress_proxy::proxy_command(std::string(k_companion_bin), proxy);
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
}

std::string companion_unit(const std::vector<std::string>& command, const std::string& sandbox,
                           const CompanionLimits& limits) {
    // systemd's ExecStart quoting is close enough to the shell's for these words.
    // On cgroup v1 a memory cgroup accounts TCP memory only where a
    // memory.kmem.tcp limit was written, not below it: the proxy's own cgroup
    // (systemd makes one per unit) gets the same limit, as root before it
    // starts, and charges it up to the container's (raw.lxc). Not there (cgroup
    // v2, where memory.max counts sockets): nothing to do.
    return fmt::format(R"UNIT([Unit]
Description=agentctl egress proxy of sandbox {sandbox}
After=network.target
StartLimitIntervalSec=0

[Service]
User=nobody
Group=nogroup
WorkingDirectory={run}
ExecStartPre=+/bin/sh -c 'g=$$(sed -n "s/^[0-9]*:memory://p" /proc/self/cgroup); f=/sys/fs/cgroup/memory$$g/memory.kmem.tcp.limit_in_bytes; [ "$$g" = / ] || [ ! -e "$$f" ] || echo {tcp} >"$$f"'
ExecStart={command}
ExecReload=/bin/sh -c "kill -HUP ${{MAINPID}}"
Restart=always
RestartSec=1
NoNewPrivileges=yes
CapabilityBoundingSet=
AmbientCapabilities=
Environment=ASAN_OPTIONS=detect_leaks=0

[Install]
WantedBy=multi-user.target
)UNIT",
                       fmt::arg("sandbox", sandbox), fmt::arg("run", k_companion_run),
                       fmt::arg("command", shell_join(command)), fmt::arg("tcp", limits.socket_memory_bytes));
}

std::map<std::string, std::string> parse_sha256sums(const std::string& output) {
    std::map<std::string, std::string> sums;
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        std::string hash, path;
        if (!(fields >> hash >> path) || hash.size() != 64) continue;
        if (!path.empty() && path.front() == '*') path.erase(0, 1);
        sums[path] = hash;
    }
    return sums;
}

std::string companion_setup_script(const EgressSite& site, bool restart) {
    const auto address = proxy_address(ProxyPlacement::Instance, site.subnet);
    return fmt::format(R"SH(set -eu
umask 022
# The network is static: no DHCP client (a DHCP server on the bridge could
# answer it), no IPv6, no router advertisements.
mkdir -p /etc/systemd/network
cat >/etc/systemd/network/00-agentctl-eth0.network <<'EOF'
[Match]
Name=eth0

[Network]
Address={address}
Gateway={gateway}
DNS={gateway}
DHCP=no
IPv6AcceptRA=no
LinkLocalAddressing=no
EOF
# The resolver is the bridge's own dnsmasq: it answers allowlisted names only.
rm -f /etc/resolv.conf
printf 'nameserver %s\n' {gateway} >/etc/resolv.conf
chmod 0755 {bin} {lib}/* 2>/dev/null || true
mkdir -p {run}
chown nobody:nogroup {run}
chmod 0700 {run}
chmod 0644 {etc}/* 2>/dev/null || true
unit=/etc/systemd/system/{unit}
changed={restart}
if ! cmp -s {upload} "$unit"; then mv {upload} "$unit"; changed=1; else rm -f {upload}; fi
if ! grep -q agentctl /etc/resolv.conf.agentctl 2>/dev/null; then
  # First setup: networkd takes the static configuration now (and may take
  # the address down and up again meanwhile).
  networkctl reload >/dev/null 2>&1 || systemctl restart systemd-networkd >/dev/null 2>&1 || true
  echo agentctl >/etc/resolv.conf.agentctl
fi
n=0
until ip -4 -o addr show dev eth0 2>/dev/null | grep -q " {ip}/" || grep -q -- "-- {ip}\$" /proc/net/fib_trie 2>/dev/null; do
  n=$((n + 1)); [ $n -lt 100 ] || break; sleep 0.1
done
systemctl daemon-reload
systemctl enable {unit} >/dev/null 2>&1
# Unchanged: a running proxy re-reads the policy just pushed (SIGHUP), a stopped one starts.
if [ "$changed" = 1 ]; then systemctl restart {unit}; else systemctl reload-or-restart {unit}; fi
n=0
until bash -c 'exec 3<>/dev/tcp/$0/$1' {ip} {port} 2>/dev/null; do
  n=$((n + 1))
  if [ $n -ge 150 ]; then
    echo "the egress proxy did not listen on {ip}:{port} within 15 s" >&2
    systemctl status --no-pager {unit} >&2 || true
    journalctl -u {unit} -n 12 --no-pager >&2 || true
    exit 1
  fi
  sleep 0.1
done
echo agentctl-egress-up
)SH",
                       fmt::arg("address", address.to_string()),
                       fmt::arg("gateway", site.subnet.host(1).address_text()), fmt::arg("bin", k_companion_bin),
                       fmt::arg("lib", k_companion_lib), fmt::arg("run", k_companion_run),
                       fmt::arg("etc", k_companion_etc), fmt::arg("unit", k_companion_unit),
                       fmt::arg("upload", companion_unit_upload_path()), fmt::arg("restart", restart ? 1 : 0),
                       fmt::arg("ip", address.address_text()), fmt::arg("port", k_egress_proxy_port));
}

}  // namespace agentctl::provider::incus
