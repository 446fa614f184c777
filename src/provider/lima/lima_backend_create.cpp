// agentctl create on the lima provider: one `limactl create --set ...`, the
// documented fallback (bare create + one `limactl edit --set` per field), and
// no half-configured instance left behind.
#include <chrono>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "core/utc_time.hpp"
#include "egress_proxy/sandbox_ca.hpp"
#include "provider/common/failed_create.hpp"
#include "provider/lima/lima_backend.hpp"
#include "provider/lima/lima_paths.hpp"
#include "provider/lima/loopback.hpp"

namespace agentctl::provider::lima {
namespace {

// Lima's instance names (pkg/limatype/dirnames ValidateInstName): a letter or
// digit first, then letters, digits, '.', '_' or '-'.
void validate_name(const std::string& name) {
    static const std::regex k_name("[A-Za-z0-9][A-Za-z0-9._-]*");
    if (name.empty() || name.size() > 64 || !std::regex_match(name, k_name)) {
        throw Error(fmt::format("invalid sandbox name \"{}\" for the lima provider", name),
                    "use letters, digits, '.', '_' and '-', starting with a letter or digit (at most 64 characters)");
    }
}

}  // namespace

void LimaBackend::create(const SandboxSpec& spec) {
    validate_name(spec.name);
    if (!spec.network.dns.servers.empty()) {
        throw Error(
            "the lima provider cannot apply network.dns.servers: a guest's DNS always goes through Lima's "
            "host resolver (the Mac's own DNS settings), which agentctl cannot point elsewhere",
            "remove spec.network.dns.servers from the profile, or use the incus provider");
    }
    if (spec.isolation == Isolation::Container) {
        throw Error("the lima provider only creates virtual machines", "drop the container isolation request");
    }
    const bool confined = spec.network.enabled;
    const std::string image = spec.image.empty() ? k_default_image : spec.image;

    // Ports are pinned now and recorded; start re-checks them.
    // The seeds name the state directory too: two users (or two runs) with a
    // sandbox of the same name start from different ports.
    auto taken = ports_in_use_by_other_instances(spec.name);
    const auto seed = m_ctx.state_dir + "/" + spec.name;
    ConfinementSettings settings;
    settings.ssh_port = pick_loopback_port(seed + "/ssh", taken);
    taken.insert(settings.ssh_port);
    settings.proxy_port = pick_loopback_port(seed + "/egress-proxy", taken);
    settings.dns_disabled = confined && spec.network.dns.disabled;
    ConfinementSettings applied = settings;
    if (!confined) applied.proxy_port = 0;

    const auto expressions = create_expressions(spec, applied);
    if (m_ctx.preview) {
        print_preview(limactl_create(spec.name, image, expressions));
        return;
    }

    const auto dir = instance_state_dir(m_ctx.state_dir, spec.name);
    if (load_state(m_ctx.state_dir, spec.name)) {
        throw Error(fmt::format("sandbox \"{}\" already exists", spec.name),
                    "start it with `agentctl start " + spec.name + "`, or delete it first");
    }
    create_locked(spec, image, expressions, settings, confined);
    // With secrets, create boots the sandbox to hand the guest its CA and
    // placeholders; a create that could not leaves nothing behind.
    if (spec.agent.empty() && spec.secrets.empty()) return;
    try {
        start(spec.name, StartRequest{});
    } catch (...) {
        const auto state = load_state(m_ctx.state_dir, spec.name);
        if (spec.secrets.empty() || !state || state->secrets_installed) throw;
        common::undo_failed_create(
            m_ctx.reporter, spec.name, spec.keep_on_failure, [&] { remove(spec.name, true); },
            fmt::format("agentctl delete {} --force", spec.name));
        throw;
    }
}

void LimaBackend::create_locked(const SandboxSpec& spec, const std::string& image,
                                const std::vector<std::string>& expressions, const ConfinementSettings& settings,
                                bool confined) {
    const auto dir = instance_state_dir(m_ctx.state_dir, spec.name);
    core::FileLock lock(lock_file_path(m_ctx.state_dir, spec.name));
    if (load_state(m_ctx.state_dir, spec.name)) {
        throw Error(fmt::format("sandbox \"{}\" already exists", spec.name),
                    "start it with `agentctl start " + spec.name + "`, or delete it first");
    }

    bool lima_created = false;
    auto cleanup = [&] {
        if (lima_created) {
            ProcessRequest del;
            del.argv = limactl_delete(spec.name);
            del.timeout = std::chrono::minutes(2);
            try {
                (void)m_ctx.runner.run(del);
            } catch (const Error&) {
            }
        }
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    };

    try {
        if (inspect(spec.name)) {
            throw Error(
                fmt::format("a Lima instance named \"{}\" already exists and was not created by agentctl", spec.name),
                "choose another name, or remove it with `limactl delete " + spec.name + "`");
        }
        ProcessRequest request;
        request.argv = limactl_create(spec.name, image, expressions);
        request.timeout = std::chrono::minutes(20);
        auto result = m_ctx.runner.run(request);
        if (!result.ok()) {
            if (result.err.find("already exists") != std::string::npos) {
                throw Error(fmt::format("a Lima instance named \"{}\" already exists", spec.name),
                            "choose another name, or remove it with `limactl delete " + spec.name + "`");
            }
            // The documented fallback: a bare create, then one edit per field.
            m_ctx.reporter.notice("`limactl create --set` failed (" + result.err.substr(0, result.err.find('\n')) +
                                  "); creating the instance bare and applying each setting with `limactl edit`");
            if (inspect(spec.name)) {
                lima_created = true;  // a partial instance from the failed call
                run_limactl(limactl_delete(spec.name), "remove the partly created instance " + spec.name);
                lima_created = false;
            }
            run_limactl(limactl_create(spec.name, image, {}), "create Lima instance " + spec.name);
            lima_created = true;
            for (const auto& expression : expressions) {
                run_limactl(limactl_edit(spec.name, expression), "configure " + spec.name + " (" + expression + ")");
            }
        }
        lima_created = true;

        LimaState state;
        state.name = spec.name;
        state.image = image;
        state.profiles = spec.profiles;
        state.created_at = core::utc_stamp(std::chrono::system_clock::now());
        state.user = spec.user.empty() ? "agent" : spec.user;
        state.unrestricted = !confined;
        state.dns_disabled = settings.dns_disabled;
        state.agent = spec.agent;
        state.ssh_port = settings.ssh_port;
        state.proxy_port = settings.proxy_port;
        state.mounts = spec.mounts;
        state.ports = spec.ports;
        write_policy(spec.name, spec.network);
        // Secrets: the placeholders and the sandbox CA, on the host only; the
        // first start hands the guest the placeholders and the CA's certificate.
        if (!spec.secrets.empty()) {
            common::write_sandbox_secrets(dir, common::plan_sandbox_secrets(spec.secrets));
            (void)egress_proxy::load_or_make_sandbox_ca(dir, spec.name);
        }
        save_state(m_ctx.state_dir, state);
    } catch (...) {
        cleanup();
        throw;
    }
}

}  // namespace agentctl::provider::lima
