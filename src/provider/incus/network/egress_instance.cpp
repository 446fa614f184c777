// The instance placement of a sandbox's egress proxy: a companion container
// on the sandbox's own bridge (proxy_instance.hpp says what it is made of).
// Everything goes through the Incus API (instance create/start/stop/delete,
// file push and pull, exec), so it works the same whether the server is this
// machine or not; the host firewall table and conntrack are left to the
// local host side, which exists only when the server is this machine.
#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "core/files.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "provider/incus/client/api.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/client/payloads.hpp"
#include "provider/incus/network/proxy_instance.hpp"
#include "provider/incus/lifecycle/settings.hpp"

namespace agentctl::provider::incus {
namespace {

namespace fs = std::filesystem;

// A whole file in one allocation (the sanitizer build of agentctl is ~270 MB).
std::string read_whole(const std::string& path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    std::string data(static_cast<std::size_t>(in.tellg()), '\0');
    in.seekg(0);
    if (!in.read(data.data(), static_cast<std::streamsize>(data.size()))) {
        throw Error(fmt::format("cannot read {}", path));
    }
    return data;
}

class InstanceEgressHost final : public EgressHost {
public:
    InstanceEgressHost(ProviderContext& context, Client& client, std::unique_ptr<EgressHost> host_side)
        : m_context(context), m_api(client), m_host(std::move(host_side)) {}

    void write_policy(const EgressSite& site, const policy::NetworkPolicy& network) override {
        const auto& sandbox = site.sandbox;
        m_policies[sandbox] = policy::policy_file_text(network);
        const auto name = companion_name(sandbox);
        if (m_api.preview()) {
            m_context.reporter.step(fmt::format("would write the egress policy of {} into {}", sandbox, name));
            return;
        }
        auto companion = ours(sandbox);
        if (!companion || !companion->running()) return;  // start_proxy writes it
        m_api.push_file(name, companion_policy_path(), m_policies[sandbox]);
        // Reload only a running proxy (SIGHUP through the unit): it re-reads the
        // policy and closes the tunnels it no longer allows.
        auto result = run(name,
                          fmt::format("chmod 0644 {0}; if systemctl is-active -q {1}; then systemctl reload {1}; fi",
                                      companion_policy_path(), k_companion_unit),
                          30);
        if (result.exit_code != 0) {
            throw Error(fmt::format("the egress proxy in {} did not reload its policy: {}", name, result.err),
                        "`agentctl start " + sandbox + "` sets it up again");
        }
    }

    void start_proxy(const EgressSite& site) override {
        const auto name = companion_name(site.sandbox);
        const auto address = proxy_address(ProxyPlacement::Instance, site.subnet).address_text();
        auto companion = m_api.instance(name);
        if (companion && (companion->config_value(key::k_role) != key::k_role_egress_proxy ||
                          companion->config_value(key::k_sandbox) != site.sandbox)) {
            throw Error(
                fmt::format("an Incus instance named {} exists and is not the egress proxy of {}", name, site.sandbox),
                "rename or delete that instance: agentctl needs the name for the sandbox's egress proxy");
        }
        const auto pool = setting(m_context, config_key::k_storage_pool);
        // The binary's hashes on this machine, while the companion comes up.
        if (!m_api.preview() && m_host_sums.empty() && !m_hashing.valid()) {
            m_hashing = std::async(std::launch::async, [this] { return host_sums(); });
        }
        if (companion && !m_api.preview()) upgrade(site, *companion, pool);
        if (!companion) {
            m_context.reporter.step(fmt::format("creating the egress proxy instance {} on {}", name, address));
            m_api.create_instance(companion_payload(site, pool, limits()), 300);
        } else if (!companion->running()) {
            m_context.reporter.step(fmt::format("starting the egress proxy instance {}", name));
            m_api.change_state(name, state_payload("start", false, -1), 120);
        }
        if (m_api.preview()) {
            m_context.reporter.step(fmt::format(
                "would push agentctl's binary (and the libraries it needs) into {} where the copy there differs, and "
                "run `agentctl egress-proxy` on {}:{} as nobody under systemd",
                name, address, k_egress_proxy_port));
            return;
        }
        wait_ready(name);
        const bool pushed = push_bundle(name);
        m_api.push_file(name, companion_policy_path(), policy_text(site.sandbox));
        const auto resolve = setting(m_context, config_key::k_proxy_resolve_file);
        if (!resolve.empty()) m_api.push_file(name, companion_resolve_path(), core::read_file(resolve));
        m_api.push_file(
            name, companion_unit_upload_path(),
            companion_unit(companion_command(bundle(), site, !resolve.empty(), limits()), site.sandbox, limits()));
        auto result = run(name, companion_setup_script(site, pushed), 60);
        if (result.exit_code != 0 || result.out.find("agentctl-egress-up") == std::string::npos) {
            throw Error(fmt::format("the egress proxy in {} did not come up (exit {}): {}", name, result.exit_code,
                                    result.err.empty() ? result.out : result.err),
                        fmt::format("look at its unit: incus exec {} -- journalctl -u {}", name, k_companion_unit));
        }
    }

    bool stop_proxy(const EgressSite& site) override {
        auto companion = ours(site.sandbox);
        if (!companion || !companion->running()) return false;
        m_api.change_state(companion_name(site.sandbox), state_payload("stop", true, -1), 120);
        return true;
    }

    ProxyStatus proxy_status(const EgressSite& site) override {
        const auto name = companion_name(site.sandbox);
        ProxyStatus status;
        status.listen = fmt::format("{}:{}", proxy_address(ProxyPlacement::Instance, site.subnet).address_text(),
                                    k_egress_proxy_port);
        status.instance = name;
        status.log_path = fmt::format("{} in instance {}", companion_log_path(), name);
        auto companion = m_api.preview() ? std::nullopt : ours(site.sandbox);
        if (!companion) {
            status.problem = "the instance does not exist";
            return status;
        }
        if (!companion->running()) {
            status.problem = fmt::format("the instance is {}", companion->status);
            return status;
        }
        auto result = run(
            name, fmt::format("systemctl show -p MainPID --value {0}; systemctl is-active {0}", k_companion_unit), 20);
        std::istringstream lines(result.out);
        std::string pid, active;
        std::getline(lines, pid);
        std::getline(lines, active);
        try {
            status.pid = active == "active" ? std::stoi(pid) : 0;
        } catch (const std::exception&) {
            status.pid = 0;
        }
        if (status.pid <= 0) status.problem = fmt::format("its proxy service is {}", active.empty() ? "?" : active);
        return status;
    }

    int print_network_log(const EgressSite& site, const LogRequest& request, std::ostream& out) override {
        const auto name = companion_name(site.sandbox);
        const auto local =
            fs::temp_directory_path() / fmt::format("agentctl-egress-log-{}-{}", site.sandbox, ::getpid());
        // The proxy's log files in the companion (the decisions, the refusals and
        // their rotated copies), each copied to the same name beside `local`.
        const auto remote_files = egress_proxy::kept_log_files(companion_log_path());
        const auto local_files = egress_proxy::kept_log_files(local.string());
        struct Remove {
            std::vector<std::string> paths;
            ~Remove() {
                std::error_code ec;
                for (const auto& path : paths) fs::remove(path, ec);
            }
        } remove{local_files};
        // What each copy holds: a file that only grew is appended to (a follower
        // reads on), one that changed otherwise (rotated) is replaced.
        auto copied = std::make_shared<std::vector<std::string>>(remote_files.size());
        const auto fetch = [this, name, remote_files, local_files, copied] {
            for (std::size_t i = 0; i < remote_files.size(); ++i) {
                std::string text;
                try {
                    text = m_api.pull_file(name, remote_files[i]);
                } catch (const NotFound&) {
                    text.clear();  // nothing logged there yet
                }
                auto& before = (*copied)[i];
                if (text == before) continue;
                if (text.starts_with(before) && !before.empty()) {
                    std::ofstream(local_files[i], std::ios::binary | std::ios::app) << text.substr(before.size());
                } else {
                    core::write_file_atomic(local_files[i], text, 0600);
                }
                before = std::move(text);
            }
        };
        fetch();
        if (!request.follow) return egress_proxy::print_network_log(local.string(), request, out);
        // --follow: the copies are refreshed every second while the local follower reads them.
        std::thread([fetch] {
            for (;;) {
                std::this_thread::sleep_for(std::chrono::seconds(1));
                try {
                    fetch();
                } catch (const std::exception&) {
                    return;
                }
            }
        }).detach();
        return egress_proxy::print_network_log(local.string(), request, out);
    }

    // agentctl's resolver runs on the host side, next to the bridge, when the
    // bridge is this machine's; elsewhere the bridge's own dnsmasq resolves.
    [[nodiscard]] bool runs_resolver() const override { return m_host && m_host->runs_resolver(); }
    void start_resolver(const EgressSite& site, const ResolverSpec& spec, bool restart) override {
        if (m_host) m_host->start_resolver(site, spec, restart);
    }
    bool stop_resolver(const EgressSite& site) override { return m_host && m_host->stop_resolver(site); }
    [[nodiscard]] int resolver_pid(const EgressSite& site) override { return m_host ? m_host->resolver_pid(site) : 0; }

    void install_firewall(const FirewallSpec& spec) override {
        if (m_host) m_host->install_firewall(spec);
    }

    void remove_firewall(const std::string& bridge) override {
        if (m_host) m_host->remove_firewall(bridge);
    }

    std::string forget_connections(const std::vector<std::string>& sources,
                                   const std::vector<std::string>& destinations) override {
        if (m_host) return m_host->forget_connections(sources, destinations);
        return "open direct connections were not cut: the Incus server is not this machine (they end when they "
               "close, or at the next stop)";
    }

    void remove_state(const EgressSite& site) override {
        if (m_host) m_host->remove_state(site);
        const auto& sandbox = site.sandbox;
        const auto name = companion_name(sandbox);
        auto companion = ours(sandbox);
        if (!companion) return;
        if (companion->running()) m_api.change_state(name, state_payload("stop", true, -1), 120);
        m_context.reporter.step(fmt::format("deleting the egress proxy instance {}", name));
        m_api.delete_instance(name);
    }

    [[nodiscard]] ProxyPlacement placement() const override { return ProxyPlacement::Instance; }
    [[nodiscard]] bool host_firewall() const override { return m_host != nullptr; }

private:
    // The companion of `sandbox` when it exists and is agentctl's.
    std::optional<Instance> ours(const std::string& sandbox) {
        auto companion = m_api.instance(companion_name(sandbox));
        if (!companion || companion->config_value(key::k_role) != key::k_role_egress_proxy ||
            companion->config_value(key::k_sandbox) != sandbox) {
            return std::nullopt;
        }
        return companion;
    }

    // A companion an earlier agentctl made gets what this one's payload has
    // and it lacks: the server's routing table (the proxy refuses the
    // server's addresses from it) and the raw.lxc limits (its TCP memory),
    // which take effect when it starts, so a running one is restarted.
    void upgrade(const EgressSite& site, Instance& companion, const std::string& pool) {
        const auto wanted = companion_payload(site, pool, limits());
        const auto raw = wanted["config"].value("raw.lxc", "");
        const bool no_table = !companion.devices.contains(k_companion_server_routes_device);
        const bool stale_limits = companion.config_value("raw.lxc") != raw;
        if (!no_table && !stale_limits) return;
        const auto name = companion_name(site.sandbox);
        m_context.reporter.step(
            fmt::format("updating the egress proxy instance {} (its server routing table and "
                        "TCP memory limit)",
                        name));
        auto updated = companion;
        updated.devices[std::string(k_companion_server_routes_device)] = server_routes_device();
        updated.config["raw.lxc"] = raw;
        m_api.put_instance(name, updated, 120);
        if (stale_limits && companion.running()) {
            m_api.change_state(name, state_payload("restart", true, -1), 120);
        }
        if (auto fresh = m_api.instance(name)) companion = *fresh;
    }

    [[nodiscard]] CompanionLimits limits() const {
        return CompanionLimits{setting_amount(m_context, config_key::k_host_socket_memory),
                               setting_amount(m_context, config_key::k_proxy_max_tunnels)};
    }

    ExecResult run(const std::string& name, const std::string& script, int timeout) {
        return m_api.exec(name, exec_payload({"/bin/sh", "-c", script}, {}, nullptr), timeout);
    }

    void wait_ready(const std::string& name) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (;;) {
            try {
                if (run(name, "true", 20).exit_code == 0) return;
            } catch (const Error&) {
            }
            if (std::chrono::steady_clock::now() >= deadline) {
                throw Error(fmt::format("the egress proxy instance {} did not become ready within 60 s", name),
                            "check `incus info " + name + " --show-log`");
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }

    const std::string& policy_text(const std::string& sandbox) {
        auto it = m_policies.find(sandbox);
        if (it == m_policies.end()) throw Error(fmt::format("no egress policy was written for {}", sandbox));
        return it->second;
    }

    // agentctl's own binary and what it needs to run (computed once).
    const Bundle& bundle() {
        if (m_bundle) return *m_bundle;
        std::error_code ec;
        auto exe = fs::read_symlink("/proc/self/exe", ec);
        if (ec) throw Error(fmt::format("cannot find agentctl's own binary: {}", ec.message()));
        ProcessRequest request;
        request.argv = {"ldd", exe.string()};
        request.timeout = std::chrono::seconds(20);
        std::string output;
        try {
            auto result = m_context.runner.run(request);
            output = result.out + result.err;
        } catch (const Error&) {
            output = "not a dynamic executable";  // no ldd: only a static binary can be pushed as it is
        }
        m_bundle = parse_ldd(exe.string(), output);
        return *m_bundle;
    }

    std::map<std::string, std::string> sha256(const std::vector<std::string>& paths, const std::string& instance) {
        std::string out;
        if (instance.empty()) {
            ProcessRequest request;
            request.argv = {"sha256sum"};
            request.argv.insert(request.argv.end(), paths.begin(), paths.end());
            request.timeout = std::chrono::seconds(60);
            out = m_context.runner.run(request).out;
        } else {
            // The directories the pushes need are made here as well.
            std::vector<std::string> argv{"sha256sum"};
            argv.insert(argv.end(), paths.begin(), paths.end());
            out = run(instance,
                      fmt::format("mkdir -p {} {} {}; {} 2>/dev/null; true",
                                  fs::path(k_companion_bin).parent_path().string(), k_companion_lib, k_companion_etc,
                                  shell_join(argv)),
                      60)
                      .out;
        }
        return parse_sha256sums(out);
    }

    // Pushes every file of the bundle whose copy in `name` differs (by hash).
    // True when something was pushed.
    bool push_bundle(const std::string& name) {
        const auto files = bundle_files(bundle());
        std::vector<std::string> host_paths, guest_paths;
        for (const auto& [host, guest] : files) {
            host_paths.push_back(host);
            guest_paths.push_back(guest);
        }
        if (m_host_sums.empty()) m_host_sums = m_hashing.valid() ? m_hashing.get() : host_sums();
        const auto there = sha256(guest_paths, name);
        std::vector<std::pair<std::string, std::string>> stale;
        for (const auto& [host, guest] : files) {
            auto mine = m_host_sums.find(host);
            auto theirs = there.find(guest);
            if (mine == m_host_sums.end() || theirs == there.end() || mine->second != theirs->second) {
                stale.emplace_back(host, guest);
            }
        }
        if (stale.empty()) return false;
        m_context.reporter.step(fmt::format("copying agentctl into {} ({} files)", name, stale.size()));
        // Each file is written beside its old copy, then all are renamed over
        // them at once (a running proxy keeps the files it has open).
        std::string install = "set -e";
        for (const auto& [host, guest] : stale) {
            m_api.push_file(name, guest + ".new", read_whole(host));
            install += fmt::format("; chmod 0755 {0}.new; mv -f {0}.new {0}", shell_quote(guest));
        }
        auto moved = run(name, install, 30);
        if (moved.exit_code != 0) throw Error(fmt::format("cannot install agentctl in {}: {}", name, moved.err));
        return true;
    }

    // The hashes of the bundle's files on this machine, remembered between runs
    // in STATE_DIR/incus/agentctl-bundle.json by path, size, inode and mtime (a
    // sanitizer build takes seconds to hash).
    std::map<std::string, std::string> host_sums() {
        const auto files = bundle_files(bundle());
        const fs::path cache_path =
            (m_context.state_dir.empty() ? fs::temp_directory_path() / "agentctl" : fs::path(m_context.state_dir)) /
            "incus" / "agentctl-bundle.json";
        Json cache = Json::parse(core::read_file_if_exists(cache_path).value_or("{}"), nullptr, false);
        if (!cache.is_object()) cache = Json::object();
        std::map<std::string, std::string> sums;
        std::vector<std::string> missing;
        std::map<std::string, std::string> stamps;
        for (const auto& [host, guest] : files) {
            struct stat st {};
            if (::stat(host.c_str(), &st) != 0)
                throw Error(fmt::format("cannot read {}: {}", host, std::strerror(errno)));
            stamps[host] = fmt::format("{}:{}:{}:{}", st.st_dev, st.st_ino, st.st_size,
                                       st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec);
            const auto& entry = cache.value(host, Json::object());
            if (entry.value("stamp", "") == stamps[host] && entry.value("sha256", "").size() == 64) {
                sums[host] = entry.value("sha256", "");
            } else {
                missing.push_back(host);
            }
        }
        if (missing.empty()) return sums;
        for (const auto& [host, hash] : sha256(missing, "")) {
            sums[host] = hash;
            cache[host] = Json{{"stamp", stamps[host]}, {"sha256", hash}};
        }
        try {
            fs::create_directories(cache_path.parent_path());
            core::write_file_atomic(cache_path, cache.dump() + "\n", 0644);
        } catch (const std::exception&) {
            // Only a cache: hashing again next time is fine.
        }
        return sums;
    }

    ProviderContext& m_context;
    Api m_api;
    std::unique_ptr<EgressHost> m_host;
    std::map<std::string, std::string> m_policies;
    std::optional<Bundle> m_bundle;
    std::map<std::string, std::string> m_host_sums;
    std::future<std::map<std::string, std::string>> m_hashing;  // started with start_proxy
};

}  // namespace

std::unique_ptr<EgressHost> make_instance_egress_host(ProviderContext& context, Client& client,
                                                      std::unique_ptr<EgressHost> host_side) {
    return std::make_unique<InstanceEgressHost>(context, client, std::move(host_side));
}

}  // namespace agentctl::provider::incus
