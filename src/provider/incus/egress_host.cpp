#include "provider/incus/egress_host.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "core/files.hpp"
#include "egress_proxy/egress_proxy.hpp"
#include "provider/common/proxy_process.hpp"
#include "provider/incus/settings.hpp"

namespace agentctl::provider::incus {

std::string_view to_string(ProxyPlacement placement) {
    return placement == ProxyPlacement::Instance ? "instance" : "host";
}

ProxyPlacement choose_proxy_placement(std::string_view setting, bool server_local) {
    if (setting == "host") {
        if (server_local) return ProxyPlacement::Host;
        throw Error(
            "setting incus.proxyPlacement=host: the Incus server is not this machine, so the sandbox's "
            "bridge is not here for a proxy on this host",
            "agentctl config set incus.proxyPlacement=auto (a proxy instance next to the sandbox)");
    }
    if (setting == "instance") return ProxyPlacement::Instance;
    if (setting.empty() || setting == "auto") return server_local ? ProxyPlacement::Host : ProxyPlacement::Instance;
    throw Error(fmt::format("setting incus.proxyPlacement: \"{}\" is not auto, host or instance", setting),
                "agentctl config set incus.proxyPlacement=auto");
}

Ipv4Net proxy_address(ProxyPlacement placement, const Ipv4Net& bridge) {
    return placement == ProxyPlacement::Instance ? bridge.host(3) : bridge.host(1);
}

namespace {

namespace fs = std::filesystem;

// The proxy runs unprivileged, with its working directory in `run/` (owned by
// that user, where it writes its pid file and log) and every path relative to
// it, so that it never has to traverse agentctl's own (possibly private)
// config directory. The policy file lives one level up, owned by root and
// only readable for the proxy.
struct Paths {
    fs::path dir;  // STATE_DIR/incus/NAME (root, 0755)
    fs::path run;  // dir/run (proxy user, 0700)
    fs::path policy() const { return dir / "egress-policy.json"; }
    fs::path resolve() const { return dir / "egress-resolve"; }
    fs::path pid() const { return run / "egress-proxy.pid"; }
    fs::path log() const { return run / "egress.log"; }
    fs::path output() const { return dir / "egress-proxy.out"; }
    // The resolver (dnsmasq) starts as root and drops to the proxy's user
    // itself: its files live in `dir`, written before it drops.
    fs::path resolver_pid() const { return dir / "resolver.pid"; }
    fs::path resolver_leases() const { return dir / "resolver.leases"; }
    fs::path resolver_output() const { return dir / "resolver.out"; }
};

class LocalEgressHost final : public EgressHost {
public:
    explicit LocalEgressHost(ProviderContext& context) : m_context(context) {
        if (const passwd* pw = ::getpwnam(m_user.c_str()); pw != nullptr) {
            m_uid = pw->pw_uid;
            m_gid = pw->pw_gid;
        }
    }

    void write_policy(const std::string& sandbox, const policy::NetworkPolicy& network) override {
        auto paths = prepare(sandbox);
        core::write_file_atomic(paths.policy(), policy::to_policy_file(network).dump(2) + "\n", 0644);
        if (int pid = running(paths); pid > 0) ::kill(pid, SIGHUP);
    }

    void start_proxy(const EgressSite& site) override {
        const auto& sandbox = site.sandbox;
        const auto address = site.subnet.host(1).address_text();
        auto paths = prepare(sandbox);
        const auto listen = fmt::format("{}:{}", address, k_egress_proxy_port);
        if (running(paths) > 0) {
            if (common::tcp_port_listening(address, k_egress_proxy_port)) return;
            common::stop_proxy(paths.pid().string(), std::chrono::seconds(2), is_ours(paths));
        }
        ::unlink(paths.pid().c_str());
        std::vector<std::string> argv{
            self_exe(),   "egress-proxy",     "--listen", listen,       "--policy",  "../egress-policy.json",
            "--pid-file", "egress-proxy.pid", "--log",    "egress.log", "--sandbox", sandbox};
        auto resolve = setting(m_context, config_key::k_proxy_resolve_file);
        if (!resolve.empty()) {
            // A copy the proxy user can read, wherever the original lives.
            core::write_file_atomic(paths.resolve(), core::read_file(resolve), 0644);
            argv.insert(argv.end(), {"--resolve-file", "../egress-resolve"});
        } else {
            std::error_code ec;
            fs::remove(paths.resolve(), ec);
        }
        common::SpawnOptions options;
        options.output = paths.output().string();
        options.working_dir = paths.run.string();
        options.run_as = common::Credentials{m_uid, m_gid};
        common::start_detached_proxy(argv, options, paths.pid().string(), address, k_egress_proxy_port);
    }

    bool stop_proxy(const std::string& sandbox) override {
        auto paths = locate(sandbox);
        return common::stop_proxy(paths.pid().string(), std::chrono::seconds(5), is_ours(paths));
    }

    ProxyStatus proxy_status(const EgressSite& site) override {
        auto paths = locate(site.sandbox);
        return {running(paths), fmt::format("{}:{}", site.subnet.host(1).address_text(), k_egress_proxy_port),
                paths.log().string(), "", ""};
    }

    int print_network_log(const EgressSite& site, bool follow, bool json, std::ostream& out) override {
        return egress_proxy::print_network_log(locate(site.sandbox).log().string(), follow, json, out);
    }

    [[nodiscard]] bool runs_resolver() const override { return true; }

    void start_resolver(const std::string& sandbox, const ResolverSpec& spec, bool restart) override {
        auto paths = prepare(sandbox);
        if (resolver_pid(sandbox) > 0) {
            if (!restart && common::tcp_port_listening(spec.gateway, k_dns_port)) return;
            common::stop_proxy(paths.resolver_pid().string(), std::chrono::seconds(2), is_resolver(paths));
        }
        ::unlink(paths.resolver_pid().c_str());
        const auto dnsmasq = find_dnsmasq();
        const auto* group = ::getgrgid(m_gid);
        const ResolverFiles files{paths.resolver_pid().string(), paths.resolver_leases().string()};
        common::SpawnOptions options;
        options.output = paths.resolver_output().string();
        common::start_detached_proxy(
            resolver_arguments(dnsmasq, spec, files, m_user, group != nullptr ? group->gr_name : "nogroup"), options,
            files.pid, spec.gateway, k_dns_port);
    }

    bool stop_resolver(const std::string& sandbox) override {
        auto paths = locate(sandbox);
        return common::stop_proxy(paths.resolver_pid().string(), std::chrono::seconds(5), is_resolver(paths));
    }

    [[nodiscard]] int resolver_pid(const std::string& sandbox) override {
        auto paths = locate(sandbox);
        return common::running_proxy_pid(paths.resolver_pid().string(), is_resolver(paths));
    }

    void install_firewall(const FirewallSpec& spec) override { nft(firewall_script(spec), spec.bridge); }

    void remove_firewall(const std::string& bridge) override { nft(firewall_delete_script(bridge), bridge); }

    std::string forget_connections(const std::vector<std::string>& sources,
                                   const std::vector<std::string>& destinations) override {
        for (const auto& source : sources) {
            for (const auto& destination : destinations) {
                ProcessRequest request;
                request.argv = {"conntrack", "-D", "-s", source, "-d", destination};
                request.timeout = std::chrono::seconds(10);
                try {
                    // Exit 1 with "0 flow entries" is the normal "nothing open".
                    (void)m_context.runner.run(request);
                } catch (const Error& e) {
                    return fmt::format("open connections to {} were not cut: {} (install the conntrack tool)",
                                       destination, e.what());
                }
            }
        }
        return {};
    }

    void remove_state(const std::string& sandbox) override {
        std::error_code ec;
        fs::remove_all(locate(sandbox).dir, ec);
    }

    [[nodiscard]] unsigned proxy_uid() const override { return m_uid; }
    [[nodiscard]] ProxyPlacement placement() const override { return ProxyPlacement::Host; }
    [[nodiscard]] bool host_firewall() const override { return true; }

private:
    std::string self_exe() const {
        std::string exe = m_context.self_exe;
        if (exe.empty() || exe.front() != '/') {
            std::error_code ec;
            auto resolved = fs::read_symlink("/proc/self/exe", ec);
            if (!ec) exe = resolved.string();
        }
        return exe;
    }

    Paths locate(const std::string& sandbox) const {
        // <state_dir>/incus/NAME/, as every provider keeps its per-sandbox state.
        fs::path base =
            m_context.state_dir.empty() ? fs::temp_directory_path() / "agentctl" : fs::path(m_context.state_dir);
        Paths paths;
        paths.dir = base / "incus" / sandbox;
        paths.run = paths.dir / "run";
        return paths;
    }

    Paths prepare(const std::string& sandbox) const {
        auto paths = locate(sandbox);
        fs::create_directories(paths.run);
        ::chmod(paths.dir.c_str(), 0755);
        if (::chown(paths.run.c_str(), m_uid, m_gid) != 0 || ::chmod(paths.run.c_str(), 0700) != 0) {
            throw Error(fmt::format("cannot hand {} to the egress proxy's user (uid {}): {}", paths.run.string(), m_uid,
                                    std::strerror(errno)),
                        "agentctl must run as root to confine Incus sandboxes");
        }
        return paths;
    }

    static common::PidCheck is_ours(const Paths& paths) {
        const auto run = paths.run.string();
        return [run](int pid) { return common::is_egress_proxy_in(pid, run); };
    }

    static int running(const Paths& paths) { return common::running_proxy_pid(paths.pid().string(), is_ours(paths)); }

    // A dnsmasq started with this sandbox's pid file (its command line names it).
    static common::PidCheck is_resolver(const Paths& paths) {
        const auto flag = "--pid-file=" + paths.resolver_pid().string();
        return [flag](int pid) { return common::process_has_argument(pid, flag); };
    }

    static std::string find_dnsmasq() {
        for (const char* candidate : {"/usr/sbin/dnsmasq", "/sbin/dnsmasq", "/usr/bin/dnsmasq"}) {
            if (::access(candidate, X_OK) == 0) return candidate;
        }
        throw Error("dnsmasq is not installed: agentctl runs it as each Incus sandbox's resolver",
                    "install it: apt-get install dnsmasq-base (scripts/incus/up.sh does)");
    }

    void nft(const std::string& script, const std::string& bridge) {
        ProcessRequest request;
        request.argv = {"nft", "-f", "-"};
        request.stdin_data = script;
        request.timeout = std::chrono::seconds(20);
        ProcessResult result;
        try {
            result = m_context.runner.run(request);
        } catch (const Error& e) {
            throw Error(fmt::format("cannot run nft for bridge {}: {}", bridge, e.what()),
                        "install nftables (scripts/incus/up.sh does)");
        }
        if (result.exit_code != 0 || result.signaled || result.timed_out) {
            throw Error(fmt::format("nft refused agentctl's firewall table for bridge {}: {}", bridge,
                                    result.err.empty() ? result.out : result.err),
                        "agentctl must run as root, on a kernel with nftables");
        }
    }

    ProviderContext& m_context;
    std::string m_user = "nobody";
    unsigned m_uid = 65534;
    unsigned m_gid = 65534;
};

class PreviewEgressHost final : public EgressHost {
public:
    explicit PreviewEgressHost(ProviderContext& context) : m_context(context) {}
    void write_policy(const std::string& sandbox, const policy::NetworkPolicy&) override {
        m_context.reporter.step(fmt::format("would write the egress policy of {}", sandbox));
    }
    void start_proxy(const EgressSite& site) override {
        m_context.reporter.step(fmt::format("would start the egress proxy of {} on {}:{} as nobody", site.sandbox,
                                            site.subnet.host(1).address_text(), k_egress_proxy_port));
    }
    bool stop_proxy(const std::string& sandbox) override {
        m_context.reporter.step(fmt::format("would stop the egress proxy of {}", sandbox));
        return false;
    }
    ProxyStatus proxy_status(const EgressSite& site) override {
        return {0, fmt::format("{}:{}", site.subnet.host(1).address_text(), k_egress_proxy_port), "", "", ""};
    }
    [[nodiscard]] bool runs_resolver() const override { return true; }
    void start_resolver(const std::string& sandbox, const ResolverSpec& spec, bool) override {
        const auto argv = resolver_arguments(
            "dnsmasq", spec, ResolverFiles{"STATE/resolver.pid", "STATE/resolver.leases"}, "nobody", "nogroup");
        m_context.reporter.step(fmt::format("would start the resolver of {} on {}:{}: {}", sandbox, spec.gateway,
                                            k_dns_port, shell_join(argv)));
    }
    bool stop_resolver(const std::string& sandbox) override {
        m_context.reporter.step(fmt::format("would stop the resolver of {}", sandbox));
        return false;
    }
    [[nodiscard]] int resolver_pid(const std::string&) override { return 0; }
    int print_network_log(const EgressSite&, bool, bool, std::ostream&) override { return 0; }
    void install_firewall(const FirewallSpec& spec) override {
        m_context.reporter.step(fmt::format("would define nft table inet {}", firewall_table(spec.bridge)));
    }
    void remove_firewall(const std::string& bridge) override {
        m_context.reporter.step(fmt::format("would delete nft table inet {}", firewall_table(bridge)));
    }
    std::string forget_connections(const std::vector<std::string>&, const std::vector<std::string>&) override {
        return {};
    }
    void remove_state(const std::string&) override {}
    [[nodiscard]] unsigned proxy_uid() const override { return 65534; }
    [[nodiscard]] ProxyPlacement placement() const override { return ProxyPlacement::Host; }
    [[nodiscard]] bool host_firewall() const override { return true; }

private:
    ProviderContext& m_context;
};

}  // namespace

std::unique_ptr<EgressHost> make_local_egress_host(ProviderContext& context) {
    return std::make_unique<LocalEgressHost>(context);
}

std::unique_ptr<EgressHost> make_preview_egress_host(ProviderContext& context) {
    return std::make_unique<PreviewEgressHost>(context);
}

}  // namespace agentctl::provider::incus
