#include "cli/session.hpp"

#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unistd.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "cli/reporter.hpp"
#include "cli/sandbox_options.hpp"
#include "core/files.hpp"
#include "core/paths.hpp"

namespace agentctl::cli {
namespace {

// The start-time mount check every provider runs before anything boots with
// recorded mounts: the rules `create` applied, with this session's profiles.
class SessionMountChecker final : public MountChecker {
public:
    explicit SessionMountChecker(Session& session) : m_session(session) {}
    void recheck(const std::string& name, const std::vector<std::string>& profiles,
                 const std::vector<Mount>& recorded) const override {
        recheck_recorded_mounts(m_session, name, profiles, recorded);
    }

private:
    Session& m_session;
};

}  // namespace

struct Session::State {
    std::optional<core::Config> config;
    std::unique_ptr<Reporter> reporter;
    std::unique_ptr<ProcessRunner> runner;
    std::unique_ptr<HostPlatform> platform;
    std::unique_ptr<SessionMountChecker> mount_checker;
    std::unique_ptr<ProviderContext> context;
    std::unique_ptr<Provider> provider;
    std::vector<std::unique_ptr<core::FileLock>> locks;
    std::set<std::string> locked;  // the sandboxes `locks` holds, by name
    std::optional<std::filesystem::path> state_dir;
    std::optional<std::filesystem::path> runtime_dir;
    // --preview --output json: the command's output and the preview lines, kept
    // apart until finish() prints them as one document.
    std::ostringstream json_result;
    std::ostringstream json_preview;
};

Session::Session(GlobalOptions& globals) : m_globals(globals), m_state(std::make_unique<State>()) {}
Session::~Session() = default;

bool Session::collecting() const { return m_globals.preview && json(); }

std::ostream& Session::out() { return collecting() ? static_cast<std::ostream&>(m_state->json_result) : std::cout; }

void Session::fail_step() {
    if (m_state->reporter) m_state->reporter->fail_step();
}

void Session::finish() {
    if (!collecting()) return;
    nlohmann::json commands = nlohmann::json::array();
    std::istringstream lines(m_state->json_preview.str());
    for (std::string line; std::getline(lines, line);) {
        if (!line.empty()) commands.push_back(line);
    }
    nlohmann::json doc{{"preview", true}, {"commands", commands}};
    const auto result = m_state->json_result.str();
    if (!result.empty()) {
        auto parsed = nlohmann::json::parse(result, nullptr, false);
        doc["result"] = parsed.is_discarded() ? nlohmann::json(result) : parsed;
    }
    std::cout << doc.dump(2) << "\n";
}

Reporter& Session::reporter() {
    if (!m_state->reporter) m_state->reporter = make_terminal_reporter(json());
    return *m_state->reporter;
}

core::Config& Session::config() {
    if (!m_state->config) m_state->config = core::Config::load(core::config_paths_from_environment(), config_keys());
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
    // --remote names a remote of the one provider that has remotes: it implies that provider.
    if (name.empty() && !m_globals.remote.empty()) {
        if (const auto* remotes = remote_provider()) name = remotes->name;
    }
    if (name.empty()) {
        throw Error(fmt::format("no provider configured; run `agentctl config set provider=<{}>` or pass --provider",
                                provider_names("|")));
    }
    const auto* entry = find_provider(name);
    if (entry == nullptr) {
        throw Error(fmt::format("unknown provider '{}'", name), "choose one of " + provider_names(", "));
    }
    return *entry;
}

CapabilityMatrix Session::capabilities() { return provider_entry().capabilities(platform()); }

void Session::gate(Feature feature) {
    const auto& entry = provider_entry();
    const auto matrix = entry.capabilities(platform());
    const auto capability = matrix.get(feature);
    if (capability.status == CapabilityStatus::Supported) return;
    auto refused = refusal(entry.name, feature, capability);
    // A preview runs nothing, so it may show the plan of a feature that cannot
    // run yet, where the provider has the code that prints one.
    if (capability.status == CapabilityStatus::UnderDevelopment && m_globals.preview && matrix.implemented(feature)) {
        reporter().warning(fmt::format("{} (preview only)", refused.what()));
        return;
    }
    if (capability.status == CapabilityStatus::ManualWorkaround && m_globals.force_partial) {
        reporter().warning(refused.what());
        return;
    }
    throw refused;
}

namespace {

// A part the gate let through: the matrix guarantees the provider has it.
template <class Part>
Part& gated(Part* part, std::string_view provider, std::string_view what) {
    if (part == nullptr) {
        throw std::logic_error(
            fmt::format("the {} provider has no {} part, but its matrix let it through", provider, what));
    }
    return *part;
}

}  // namespace

Lifecycle& Session::lifecycle() { return provider().lifecycle(); }
Commands& Session::commands() { return gated(provider().commands(), provider_entry().name, "commands"); }
Console& Session::console() { return gated(provider().console(), provider_entry().name, "console"); }
EgressLog& Session::egress_log() { return gated(provider().egress_log(), provider_entry().name, "egress log"); }
Snapshots& Session::snapshots() { return gated(provider().snapshots(), provider_entry().name, "snapshots"); }
Images& Session::images() { return gated(provider().images(), provider_entry().name, "images"); }
EgressPolicy& Session::egress_policy() {
    return gated(provider().egress_policy(), provider_entry().name, "egress policy");
}
Collector& Session::collector() { return gated(provider().collector(), provider_entry().name, "collector"); }
WarmPool& Session::warm_pool() { return gated(provider().warm_pool(), provider_entry().name, "warm pool"); }

Provider& Session::provider() {
    if (m_state->provider) return *m_state->provider;
    const auto& entry = provider_entry();
    std::map<std::string, std::string> settings;
    for (const auto& key : config().keys()) {
        if (auto value = config().get(key.name)) settings[std::string(key.name)] = value->value;
    }
    // --remote and --project win over the configuration; both name the remote provider's objects.
    for (const auto& [flag, value, setting] : {std::tuple{"--remote", &m_globals.remote, entry.remote_setting},
                                               std::tuple{"--project", &m_globals.project, entry.project_setting}}) {
        if (value->empty()) continue;
        if (setting.empty()) {
            const auto* remotes = remote_provider();  // the flags exist only when one provider has remotes
            throw Error(
                fmt::format("{} names an {} {}, but the provider is {}", flag, remotes->title, flag + 2, entry.name),
                fmt::format("drop {}, or use --provider {}", flag, remotes->name));
        }
        settings[std::string(setting)] = *value;
    }
    std::ostream& preview_out = collecting() ? static_cast<std::ostream&>(m_state->json_preview) : out();
    m_state->mount_checker = std::make_unique<SessionMountChecker>(*this);
    m_state->context =
        std::make_unique<ProviderContext>(ProviderContext{.runner = runner(),
                                                          .platform = platform(),
                                                          .reporter = reporter(),
                                                          .out = preview_out,
                                                          .mount_checker = *m_state->mount_checker,
                                                          .preview = m_globals.preview,
                                                          .config_dir = config().paths().config_dir.string(),
                                                          .self_exe = self_exe(),
                                                          .settings = std::move(settings),
                                                          .state_dir = state_dir().string(),
                                                          .runtime_dir = runtime_dir().string()});
    m_state->provider = entry.create(*m_state->context);
    return *m_state->provider;
}

void Session::lock_instance(const std::string& name) {
    if (m_globals.preview) return;
    // Held already by this process: a second lock on the same file would wait for itself.
    if (!m_state->locked.insert(name).second) return;
    const auto path = runtime_dir() / "locks" / fmt::format("{}-{}.lock", provider_entry().name, name);
    m_state->locks.push_back(std::make_unique<core::FileLock>(path, [&] {
        reporter().notice(
            fmt::format("waiting for another agentctl that is working on {} (lock {})", name, path.string()));
    }));
}

const std::filesystem::path& Session::state_dir() {
    if (m_state->state_dir) return *m_state->state_dir;
    auto dir = core::state_dir();
    if (!m_globals.preview) {
        core::ensure_private_dir(dir);
        const auto old_dir = config().paths().config_dir;
        for (const auto& moved : core::migrate_state(old_dir, dir)) {
            reporter().notice(fmt::format("moved {} to {} (agentctl now keeps its state there)",
                                          (old_dir / moved).string(), (dir / moved).string()));
        }
    }
    m_state->state_dir = std::move(dir);
    return *m_state->state_dir;
}

const std::filesystem::path& Session::runtime_dir() {
    if (m_state->runtime_dir) return *m_state->runtime_dir;
    auto dir = core::runtime_dir();
    if (!m_globals.preview) core::ensure_private_dir(dir);
    m_state->runtime_dir = std::move(dir);
    return *m_state->runtime_dir;
}

}  // namespace agentctl::cli
