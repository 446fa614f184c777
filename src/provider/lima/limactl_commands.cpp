#include "provider/lima/limactl_commands.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace agentctl::provider::lima {
namespace {

std::string join(const std::vector<std::string>& parts, const char* separator) {
    std::string out;
    for (const auto& p : parts) {
        if (!out.empty()) out += separator;
        out += p;
    }
    return out;
}

std::string mount_object(const Mount& m) {
    nlohmann::ordered_json o = {{"location", m.host_path}, {"mountPoint", m.guest_path}, {"writable", m.writable}};
    return o.dump();
}

std::vector<std::string> confinement_parts(const ConfinementSettings& s) {
    std::vector<std::string> parts;
    parts.push_back(".networks = []");
    parts.push_back(".ssh.localPort = " + std::to_string(s.ssh_port));
    if (s.proxy_port != 0) {
        parts.push_back(".propagateProxyEnv = false");
        for (const auto& [key, value] : proxy_environment(s.proxy_port)) {
            parts.push_back(".env." + key + " = " + yq_string(value));
        }
    }
    if (s.dns_disabled) parts.push_back(".hostResolver.enabled = false");
    return parts;
}

}  // namespace

std::string yq_string(const std::string& value) { return nlohmann::json(value).dump(); }

std::string lima_size(std::uint64_t bytes) {
    constexpr std::uint64_t k_kib = 1024;
    constexpr std::uint64_t k_mib = k_kib * 1024;
    constexpr std::uint64_t k_gib = k_mib * 1024;
    constexpr std::uint64_t k_tib = k_gib * 1024;
    if (bytes >= k_tib && bytes % k_tib == 0) return std::to_string(bytes / k_tib) + "TiB";
    if (bytes >= k_gib && bytes % k_gib == 0) return std::to_string(bytes / k_gib) + "GiB";
    if (bytes >= k_mib && bytes % k_mib == 0) return std::to_string(bytes / k_mib) + "MiB";
    if (bytes >= k_kib && bytes % k_kib == 0) return std::to_string(bytes / k_kib) + "KiB";
    return std::to_string(bytes);
}

std::map<std::string, std::string> proxy_environment(std::uint16_t proxy_port) {
    const std::string url = std::string("http://") + k_host_gateway + ":" + std::to_string(proxy_port);
    const std::string no_proxy = "localhost,127.0.0.1,::1";
    return {{"http_proxy", url},  {"https_proxy", url},   {"HTTP_PROXY", url},
            {"HTTPS_PROXY", url}, {"no_proxy", no_proxy}, {"NO_PROXY", no_proxy}};
}

bool is_macos_guest_image(const std::string& image) {
    std::string lower = image;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    auto base = lower.substr(lower.find_last_of("/:") == std::string::npos ? 0 : lower.find_last_of("/:") + 1);
    return base.rfind("macos", 0) == 0;
}

std::string mounts_expression(const std::vector<Mount>& mounts) {
    std::string expr = ".mounts = []";
    if (!mounts.empty()) {
        std::vector<std::string> objects;
        for (const auto& m : mounts) objects.push_back(mount_object(m));
        expr += " | .mounts += [" + join(objects, ", ") + "]";
    }
    return expr;
}

std::vector<std::string> create_expressions(const SandboxSpec& spec, const ConfinementSettings& settings) {
    std::vector<std::string> exprs;
    if (spec.resources.cpu_cores > 0) exprs.push_back(".cpus = " + std::to_string(spec.resources.cpu_cores));
    if (spec.resources.memory_bytes > 0)
        exprs.push_back(".memory = " + yq_string(lima_size(spec.resources.memory_bytes)));
    if (spec.resources.disk_bytes > 0) exprs.push_back(".disk = " + yq_string(lima_size(spec.resources.disk_bytes)));
    exprs.push_back(mounts_expression(spec.mounts));
    if (!spec.ports.empty()) {
        std::vector<std::string> objects;
        for (const auto& p : spec.ports) {
            nlohmann::ordered_json o = {{"guestPort", p.guest_port},
                                        {"hostPort", p.host_port},
                                        {"hostIP", p.listen_address.empty() ? "127.0.0.1" : p.listen_address},
                                        {"proto", p.protocol.empty() ? "tcp" : p.protocol}};
            objects.push_back(o.dump());
        }
        exprs.push_back(".portForwards += [" + join(objects, ", ") + "]");
    }
    exprs.push_back(".user.name = " + yq_string(spec.user.empty() ? "agent" : spec.user));
    if (!is_macos_guest_image(spec.image)) exprs.push_back(".user.passwordlessSudo = true");
    exprs.push_back(".ssh.forwardAgent = false");
    exprs.push_back(".ssh.forwardX11 = false");
    exprs.push_back(".copyToHost = []");
    for (auto& part : confinement_parts(settings)) exprs.push_back(std::move(part));
    return exprs;
}

std::string start_expression(const ConfinementSettings& settings, const std::vector<Mount>* mounts) {
    auto parts = confinement_parts(settings);
    if (mounts) parts.push_back(mounts_expression(*mounts));
    return join(parts, " | ");
}

std::vector<std::string> limactl_create(const std::string& name, const std::string& image,
                                        const std::vector<std::string>& expressions) {
    std::vector<std::string> argv = {"limactl", "create", "--name=" + name, "--tty=false"};
    for (const auto& e : expressions) {
        argv.push_back("--set");
        argv.push_back(e);
    }
    argv.push_back(image.empty() ? k_default_image : image);
    return argv;
}

std::vector<std::string> limactl_edit(const std::string& name, const std::string& expression) {
    return {"limactl", "edit", name, "--tty=false", "--set", expression};
}

std::vector<std::string> limactl_list(const std::string& name) {
    if (name.empty()) return {"limactl", "list", "--json"};
    return {"limactl", "list", name, "--json"};
}

std::vector<std::string> limactl_start(const std::string& name) { return {"limactl", "start", "--tty=false", name}; }

std::vector<std::string> limactl_stop(const std::string& name, bool force) {
    if (force) return {"limactl", "stop", "--force", name};
    return {"limactl", "stop", name};
}

std::vector<std::string> limactl_delete(const std::string& name) { return {"limactl", "delete", "--force", name}; }

std::vector<std::string> limactl_shell(const std::string& name, const std::vector<std::string>& command) {
    std::vector<std::string> argv = {"limactl", "shell", name};
    if (!command.empty()) {
        argv.push_back("--");
        argv.insert(argv.end(), command.begin(), command.end());
    }
    return argv;
}

std::vector<std::string> exec_command(const std::string& name, const std::vector<std::string>& argv, bool root,
                                      const std::string& workdir) {
    std::vector<std::string> command;
    if (root) {
        command = {"sudo", "-n"};
    }
    command.insert(command.end(), argv.begin(), argv.end());
    auto shell = limactl_shell(name, command);
    if (!workdir.empty()) shell.insert(shell.begin() + 2, {"--workdir", workdir});
    return shell;
}

std::vector<std::string> shell_command(const std::string& name, bool root) {
    if (root) return limactl_shell(name, {"sudo", "-i"});
    return limactl_shell(name, {});
}

std::vector<std::string> sandboxed(const std::string& sandbox_exec, const std::string& profile,
                                   std::vector<std::string> command) {
    std::vector<std::string> argv = {sandbox_exec, "-p", profile};
    argv.insert(argv.end(), std::make_move_iterator(command.begin()), std::make_move_iterator(command.end()));
    return argv;
}

}  // namespace agentctl::provider::lima
