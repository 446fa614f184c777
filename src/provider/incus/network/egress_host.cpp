#include "provider/incus/network/egress_host.hpp"

#include <linux/capability.h>
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
#include "egress_proxy/proxy_arguments.hpp"
#include "provider/common/command_output.hpp"
#include "provider/common/process_identity.hpp"
#include "provider/common/proxy_process.hpp"
#include "provider/incus/network/host_cgroup.hpp"
#include "provider/incus/network/host_user.hpp"
#include "provider/common/sandbox_secrets.hpp"
#include "provider/incus/lifecycle/settings.hpp"

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

std::string proxy_record_path(const std::string& state_dir) {
    return (std::filesystem::path(state_dir) / "egress-proxy.process").string();
}

std::string resolver_record_path(const std::string& state_dir) {
    return (std::filesystem::path(state_dir) / "resolver.process").string();
}

namespace {

namespace fs = std::filesystem;

// The sandbox's host files. `dir` is root's and the sandbox's group's
// (0750): the policy and the resolve file are readable by the sandbox's
// processes, by nobody else. `run` is the sandbox uid's own (0700): its
// proxy runs there and writes its pid file and its log. The
// records of what agentctl started (process_identity.hpp) and the processes'
// output are root's alone (0600).
struct Paths {
    fs::path dir;
    fs::path run;
    fs::path policy() const { return dir / "egress-policy.json"; }
    fs::path resolve() const { return dir / "egress-resolve"; }
    fs::path upstream_ca() const { return dir / "egress-upstream-ca.crt"; }
    fs::path pid() const { return run / "egress-proxy.pid"; }
    fs::path log() const { return run / "egress.log"; }
    fs::path output() const { return dir / "egress-proxy.out"; }
    fs::path record() const { return proxy_record_path(dir.string()); }
    fs::path secrets_socket() const { return run / "secrets.sock"; }
    fs::path resolver_output() const { return dir / "resolver.out"; }
    fs::path resolver_record() const { return resolver_record_path(dir.string()); }
    // Where the resolver an earlier agentctl started (as root, dropping to
    // nobody) wrote its pid.
    fs::path earlier_resolver_pid() const { return dir / "resolver.pid"; }
};

// What dnsmasq keeps as the sandbox's uid: port 53 and 67 (NET_BIND_SERVICE),
// the ARP entry of a DHCP answer (NET_ADMIN), and its interface-bound
// sockets (NET_RAW). It never is root.
const std::vector<int> k_resolver_capabilities{CAP_NET_BIND_SERVICE, CAP_NET_ADMIN, CAP_NET_RAW};

class LocalEgressHost final : public EgressHost {
public:
    explicit LocalEgressHost(ProviderContext& context) : m_context(context) {}

    void write_policy(const EgressSite& site, const policy::NetworkPolicy& network) override {
        auto paths = prepare(site);
        write_shared(site, paths.policy(), policy::policy_file_text(network));
        if (int pid = common::verified_pid(paths.record().string()); pid > 0) ::kill(pid, SIGHUP);
    }

    void start_proxy(const EgressSite& site) override {
        const auto address = site.subnet.host(1).address_text();
        auto paths = prepare(site);
        if (common::verified_pid(paths.record().string()) > 0) {
            if (common::tcp_port_listening(address, k_egress_proxy_port)) return;
        }
        stop_started(paths.record(), paths.pid(), std::chrono::seconds(2), is_earlier_proxy(paths), "egress proxy",
                     site);
        refuse_impostor(site, address, k_egress_proxy_port, "egress proxy");
        egress_proxy::ProxyOptions proxy;
        proxy.listen = fmt::format("{}:{}", address, k_egress_proxy_port);
        proxy.policy_file = "../egress-policy.json";
        proxy.pid_file = "egress-proxy.pid";
        proxy.log_file = "egress.log";
        proxy.sandbox_name = site.sandbox;
        proxy.limits.max_tunnels = setting_amount(m_context, config_key::k_proxy_max_tunnels);
        auto resolve = setting(m_context, config_key::k_proxy_resolve_file);
        if (!resolve.empty()) {
            // A copy the proxy can read, wherever the original lives.
            write_shared(site, paths.resolve(), core::read_file(resolve));
            proxy.resolve_file = "../egress-resolve";
        } else {
            std::error_code ec;
            fs::remove(paths.resolve(), ec);
        }
        auto options = spawn_options(site, paths.output());
        // The sandbox's secrets: fetched now, handed over on the proxy's stdin.
        options.input = common::proxy_secret_payload(m_context.state_dir, paths.dir, site.sandbox, m_context.runner);
        if (!options.input.empty()) {
            proxy.secrets_fd = 0;
            proxy.secrets_socket = paths.secrets_socket().filename().string();
            if (auto extra = setting(m_context, config_key::k_proxy_upstream_ca); !extra.empty()) {
                write_shared(site, paths.upstream_ca(), core::read_file(extra));
                proxy.upstream_ca_file = "../egress-upstream-ca.crt";
            }
        }
        options.working_dir = paths.run.string();
        start_recorded(egress_proxy::proxy_command(self_exe(), proxy), options, paths.pid(), paths.record(), address,
                       k_egress_proxy_port);
    }

    std::vector<std::string> refresh_secret(const std::string& secret) override {
        std::vector<std::string> reached;
        // Every sandbox directory of this agentctl (default_state_dir's parent).
        const auto root = fs::path(default_state_dir(m_context, "sandbox")).parent_path();
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(root, ec)) {
            Paths paths;
            paths.dir = entry.path();
            paths.run = paths.dir / "run";
            if (common::verified_pid(paths.record().string()) <= 0)
                continue;  // not running: it reads the value at start
            if (auto line = common::rotate_sandbox_secret(m_context.state_dir, paths.dir, paths.dir.filename().string(),
                                                          secret, paths.secrets_socket(), m_context.runner))
                reached.push_back(std::move(*line));
        }
        return reached;
    }

    bool stop_proxy(const EgressSite& site) override {
        auto paths = locate(site);
        return stop_started(paths.record(), paths.pid(), std::chrono::seconds(5), is_earlier_proxy(paths),
                            "egress proxy", site);
    }

    ProxyStatus proxy_status(const EgressSite& site) override {
        auto paths = locate(site);
        const auto address = site.subnet.host(1).address_text();
        ProxyStatus status{common::verified_pid(paths.record().string()),
                           0,
                           fmt::format("{}:{}", address, k_egress_proxy_port),
                           paths.log().string(),
                           "",
                           ""};
        if (status.pid > 0) {
            status.uid = common::process_uid(status.pid).value_or(0);
        } else if (const int other = common::tcp_listener_pid(address, k_egress_proxy_port); other > 0) {
            status.problem = impostor_text(other, "egress proxy");
        }
        return status;
    }

    int print_network_log(const EgressSite& site, const LogRequest& request, std::ostream& out) override {
        return egress_proxy::print_network_log(locate(site).log().string(), request, out);
    }

    [[nodiscard]] bool runs_resolver() const override { return true; }

    void start_resolver(const EgressSite& site, const ResolverSpec& spec, bool restart) override {
        auto paths = prepare(site);
        if (common::verified_pid(paths.resolver_record().string()) > 0 && !restart &&
            common::tcp_port_listening(spec.gateway, k_dns_port)) {
            return;
        }
        stop_started(paths.resolver_record(), paths.earlier_resolver_pid(), std::chrono::seconds(2),
                     is_earlier_resolver(paths), "resolver", site);
        refuse_impostor(site, spec.gateway, k_dns_port, "resolver");
        auto options = spawn_options(site, paths.resolver_output());
        options.capabilities = k_resolver_capabilities;
        start_recorded(resolver_arguments(find_dnsmasq(), spec), options, {}, paths.resolver_record(), spec.gateway,
                       k_dns_port);
    }

    bool stop_resolver(const EgressSite& site) override {
        auto paths = locate(site);
        return stop_started(paths.resolver_record(), paths.earlier_resolver_pid(), std::chrono::seconds(5),
                            is_earlier_resolver(paths), "resolver", site);
    }

    [[nodiscard]] int resolver_pid(const EgressSite& site) override {
        return common::verified_pid(locate(site).resolver_record().string());
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

    void remove_state(const EgressSite& site) override {
        std::error_code ec;
        fs::remove_all(locate(site).dir, ec);
        remove_cgroup(site.bridge);
    }

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

    Paths locate(const EgressSite& site) const {
        Paths paths;
        paths.dir = state_dir_of(m_context, site.host, site.sandbox);
        paths.run = paths.dir / "run";
        return paths;
    }

    Paths prepare(const EgressSite& site) const {
        auto paths = locate(site);
        const auto id = site.host.uid;
        fs::create_directories(paths.run);
        if (::chown(paths.dir.c_str(), 0, id) != 0 || ::chmod(paths.dir.c_str(), 0750) != 0 ||
            ::chown(paths.run.c_str(), id, id) != 0 || ::chmod(paths.run.c_str(), 0700) != 0) {
            throw Error(fmt::format("cannot hand {} to the host processes of {} (uid {}): {}", paths.dir.string(),
                                    site.sandbox, id, std::strerror(errno)),
                        "agentctl must run as root to confine Incus sandboxes");
        }
        // What processes of an earlier uid left there (a sandbox whose
        // processes ran as nobody before it had a uid of its own: its log).
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(paths.run, ec)) {
            struct stat st {};
            if (::lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid != id) {
                (void)::lchown(entry.path().c_str(), id, id);
            }
        }
        return paths;
    }

    // A file the sandbox's processes read: root's, readable by its group only.
    static void write_shared(const EgressSite& site, const fs::path& path, const std::string& content) {
        core::write_file_atomic(path, content, 0640);
        if (::chown(path.c_str(), 0, site.host.uid) != 0) {
            throw Error(fmt::format("cannot hand {} to the host processes of {}: {}", path.string(), site.sandbox,
                                    std::strerror(errno)),
                        "agentctl must run as root to confine Incus sandboxes");
        }
    }

    common::SpawnOptions spawn_options(const EgressSite& site, const fs::path& output) const {
        common::SpawnOptions options;
        options.output = output.string();
        options.run_as = common::Credentials{site.host.uid, site.host.uid};
        auto cgroup =
            prepare_cgroup(site.bridge, CgroupLimits{setting_amount(m_context, config_key::k_host_memory),
                                                     setting_amount(m_context, config_key::k_host_socket_memory),
                                                     setting_amount(m_context, config_key::k_host_processes)});
        for (const auto& note : cgroup.kept) m_context.reporter.warning(fmt::format("{}: {}", site.sandbox, note));
        options.cgroups = std::move(cgroup.procs);
        return options;
    }

    // Starts `argv` and records the process it started (before anything else
    // trusts it: the record is what stop and status check). `pid_file`: where
    // the process says it is ready, if it does.
    static void start_recorded(const std::vector<std::string>& argv, const common::SpawnOptions& options,
                               const fs::path& pid_file, const fs::path& record, const std::string& address,
                               std::uint16_t port) {
        if (!pid_file.empty()) ::unlink(pid_file.c_str());
        const int pid = common::start_detached_proxy(argv, options, pid_file.string(), address, port);
        const auto identity = common::identity_of(pid, argv.front());
        if (!identity) {
            ::kill(pid, SIGKILL);
            throw Error(fmt::format("{} exited right after it started: see {}", argv.front(), options.output));
        }
        common::write_identity(record.string(), *identity);
    }

    // Stops what agentctl started: the recorded process; without a record (a
    // sandbox whose processes an earlier agentctl started), the process the
    // earlier pid file names if `earlier` recognises it.
    static bool stop_started(const fs::path& record, const fs::path& earlier_pid_file, std::chrono::milliseconds grace,
                             const common::PidCheck& earlier, std::string_view what, const EgressSite& site) {
        const auto gone = fs::exists(record) ? common::stop_recorded(record.string(), grace)
                                             : common::stop_proxy(earlier_pid_file.string(), grace, earlier);
        if (gone && !*gone) {
            throw Error(fmt::format("the {} of {} is still there {} s after SIGKILL (the kernel has not finished "
                                    "tearing it down)",
                                    what, site.sandbox, common::k_kill_wait.count()),
                        "run the command again once it is gone");
        }
        return gone.has_value();
    }

    // Whatever still holds the address is not what agentctl started: it is
    // left alone, and reported.
    static void refuse_impostor(const EgressSite& site, const std::string& address, std::uint16_t port,
                                std::string_view what) {
        const int other = common::tcp_listener_pid(address, port);
        if (other <= 0) return;
        throw Error(fmt::format("{}:{} is held by a process agentctl did not start ({}), so the {} of {} cannot run "
                                "there; it was left running",
                                address, port, impostor_text(other, what), what, site.sandbox),
                    fmt::format("stop that process (kill {}), then run agentctl start {}", other, site.sandbox));
    }

    static std::string impostor_text(int pid, std::string_view what) {
        std::error_code ec;
        const auto exe = fs::read_symlink(fmt::format("/proc/{}/exe", pid), ec);
        const auto uid = common::process_uid(pid);
        return fmt::format("pid {}, {}, as {}: not the {} agentctl started", pid,
                           ec ? std::string("executable unknown") : exe.string(),
                           uid ? common::user_text(*uid) : std::string("an unknown user"), what);
    }

    static common::PidCheck is_earlier_proxy(const Paths& paths) {
        const auto run = paths.run.string();
        return [run](int pid) { return common::is_egress_proxy_in(pid, run); };
    }

    // dnsmasq as an earlier agentctl started it: its pid file in `dir`.
    static common::PidCheck is_earlier_resolver(const Paths& paths) {
        const auto flag = "--pid-file=" + paths.earlier_resolver_pid().string();
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
        const core::FileLock one_at_a_time(host_firewall_lock_path(m_context.host_lock_dir));
        ProcessResult result;
        try {
            result = m_context.runner.run(request);
        } catch (const Error& e) {
            throw Error(fmt::format("cannot run nft for bridge {}: {}", bridge, e.what()),
                        "install nftables (scripts/incus/up.sh does)");
        }
        if (!result.ok()) {
            throw Error(fmt::format("nft refused agentctl's firewall table for bridge {} ({}): {}", bridge,
                                    result.ending(), common::output_tail(result.err.empty() ? result.out : result.err)),
                        "agentctl must run as root, on a kernel with nftables");
        }
    }

    ProviderContext& m_context;
};

class PreviewEgressHost final : public EgressHost {
public:
    explicit PreviewEgressHost(ProviderContext& context) : m_context(context) {}
    void write_policy(const EgressSite& site, const policy::NetworkPolicy&) override {
        m_context.reporter.step(fmt::format("would write the egress policy of {}", site.sandbox));
    }
    void start_proxy(const EgressSite& site) override {
        m_context.reporter.step(fmt::format("would start the egress proxy of {} on {}:{} as uid {}", site.sandbox,
                                            site.subnet.host(1).address_text(), k_egress_proxy_port, site.host.uid));
    }
    bool stop_proxy(const EgressSite& site) override {
        m_context.reporter.step(fmt::format("would stop the egress proxy of {}", site.sandbox));
        return false;
    }
    ProxyStatus proxy_status(const EgressSite& site) override {
        return {0, 0, fmt::format("{}:{}", site.subnet.host(1).address_text(), k_egress_proxy_port), "", "", ""};
    }
    [[nodiscard]] bool runs_resolver() const override { return true; }
    void start_resolver(const EgressSite& site, const ResolverSpec& spec, bool) override {
        const auto argv = resolver_arguments("dnsmasq", spec);
        m_context.reporter.step(fmt::format("would start the resolver of {} on {}:{} as uid {}: {}", site.sandbox,
                                            spec.gateway, k_dns_port, site.host.uid, shell_join(argv)));
    }
    bool stop_resolver(const EgressSite& site) override {
        m_context.reporter.step(fmt::format("would stop the resolver of {}", site.sandbox));
        return false;
    }
    [[nodiscard]] int resolver_pid(const EgressSite&) override { return 0; }
    int print_network_log(const EgressSite&, const LogRequest&, std::ostream&) override { return 0; }
    void install_firewall(const FirewallSpec& spec) override {
        m_context.reporter.step(fmt::format("would define nft table inet {}", firewall_table(spec.bridge)));
    }
    void remove_firewall(const std::string& bridge) override {
        m_context.reporter.step(fmt::format("would delete nft table inet {}", firewall_table(bridge)));
    }
    std::string forget_connections(const std::vector<std::string>&, const std::vector<std::string>&) override {
        return {};
    }
    void remove_state(const EgressSite&) override {}
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
