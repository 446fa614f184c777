#include "cli/session.hpp"

#include <iostream>
#include <unistd.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "cli/reporter.hpp"
#include "cli/sandbox_options.hpp"
#include "core/files.hpp"

namespace agentctl::cli {

struct Session::State {
    std::optional<core::Config> config;
    std::unique_ptr<Reporter> reporter;
    std::unique_ptr<ProcessRunner> runner;
    std::unique_ptr<HostPlatform> platform;
    std::unique_ptr<ProviderContext> context;
    std::unique_ptr<Provider> provider;
    std::vector<std::unique_ptr<core::FileLock>> locks;
};

Session::Session(GlobalOptions& globals) : m_globals(globals), m_state(std::make_unique<State>()) {}
Session::~Session() = default;

std::ostream& Session::out() { return std::cout; }

Reporter& Session::reporter() {
    if (!m_state->reporter) m_state->reporter = make_terminal_reporter(json());
    return *m_state->reporter;
}

core::Config& Session::config() {
    if (!m_state->config) m_state->config = core::Config::load(core::config_paths_from_environment());
    return *m_state->config;
}

ProcessRunner& Session::runner() {
    if (!m_state->runner) m_state->runner = make_real_process_runner();
    return *m_state->runner;
}

const HostPlatform& Session::platform() {
    if (!m_state->platform) m_state->platform = make_real_host_platform();
    return *m_state->platform;
}

std::string Session::self_exe() const {
#if defined(__APPLE__)
    std::uint32_t size = 0;
    ::_NSGetExecutablePath(nullptr, &size);
    std::string path(size, '\0');
    if (::_NSGetExecutablePath(path.data(), &size) != 0) return "agentctl";
    path.resize(path.find('\0'));
    std::error_code ec;
    auto canonical = std::filesystem::canonical(path, ec);
    return ec ? path : canonical.string();
#else
    std::error_code ec;
    auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string("agentctl") : path.string();
#endif
}

const ProviderEntry& Session::provider_entry() {
    std::string name = m_globals.provider;
    if (name.empty()) {
        if (auto configured = config().get("provider")) name = configured->value;
    }
    if (name.empty()) {
        throw Error(
            "no provider configured; run `agentctl config set provider=<incus|lima|hyperv>` or pass --provider");
    }
    const auto* entry = find_provider(name);
    if (entry == nullptr) {
        throw Error(fmt::format("unknown provider '{}'", name), "choose one of incus, lima, hyperv");
    }
    return *entry;
}

CapabilityMatrix Session::capabilities() { return provider_entry().capabilities(platform()); }

void Session::gate(std::string_view feature) {
    const auto& entry = provider_entry();
    const auto capability = entry.capabilities(platform()).get(feature);
    switch (capability.status) {
        case CapabilityStatus::Supported: return;
        case CapabilityStatus::NotAvailable:
            throw Error(
                fmt::format("{} is not available on the {} provider: {}", feature, entry.name, capability.message),
                "run `agentctl capabilities --provider " + std::string(entry.name) + "` to see what it supports",
                exit_code::k_not_available);
        case CapabilityStatus::UnderDevelopment:
            if (m_globals.preview) {
                // A preview runs nothing, so it may show the plan of a feature that cannot run yet.
                reporter().warning(fmt::format("{} is under development on the {} provider: {} (preview only)", feature,
                                               entry.name, capability.message));
                return;
            }
            throw Error(
                fmt::format("{} is under development on the {} provider: {}", feature, entry.name, capability.message),
                "run `agentctl capabilities --provider " + std::string(entry.name) + "` to see what it supports",
                exit_code::k_not_available);
        case CapabilityStatus::ManualWorkaround:
            if (m_globals.force_partial) {
                reporter().warning(fmt::format("{} on the {} provider needs manual steps: {}", feature, entry.name,
                                               capability.message));
                return;
            }
            throw Error(
                fmt::format("{} on the {} provider needs manual steps: {}", feature, entry.name, capability.message),
                "do those steps yourself, then re-run with --force-partial", exit_code::k_manual_workaround);
    }
}

Provider& Session::provider() {
    if (m_state->provider) return *m_state->provider;
    const auto& entry = provider_entry();
    std::map<std::string, std::string> settings;
    for (const auto& key : core::config_keys()) {
        if (auto value = config().get(key.name)) settings[std::string(key.name)] = value->value;
    }
    m_state->context = std::make_unique<ProviderContext>(
        ProviderContext{runner(), platform(), reporter(), out(), m_globals.preview,
                        config().paths().config_dir.string(), self_exe(), std::move(settings)});
    m_state->context->recheck_mounts = [this](const std::string& name, const std::vector<std::string>& profiles,
                                              const std::vector<Mount>& recorded) {
        recheck_recorded_mounts(*this, name, profiles, recorded);
    };
    m_state->provider = entry.create(*m_state->context);
    return *m_state->provider;
}

void Session::lock_instance(const std::string& name) {
    if (m_globals.preview) return;
    const auto path = config().paths().config_dir / "locks" / fmt::format("{}-{}.lock", provider_entry().name, name);
    m_state->locks.push_back(std::make_unique<core::FileLock>(path));
}

}  // namespace agentctl::cli
