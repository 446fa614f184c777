// What every command needs: the global options, the configuration, the chosen
// provider behind its capability gate, and the streams to print to.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "agentctl/provider.hpp"
#include "core/config.hpp"

namespace agentctl::cli {

struct GlobalOptions {
    std::string provider;  // --provider; empty: the configured one
    std::string output = "table";
    std::string profile_dir;  // --profile-dir
    bool force_partial = false;
    bool preview = false;
    std::string log_level;  // --log-level
    int verbose = 0;        // -v
};

class Session {
public:
    explicit Session(GlobalOptions& globals);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    [[nodiscard]] GlobalOptions& globals() { return m_globals; }
    [[nodiscard]] bool json() const { return m_globals.output == "json"; }
    [[nodiscard]] std::ostream& out();
    [[nodiscard]] Reporter& reporter();

    // Loaded on first use, so commands that need no configuration never fail on it.
    [[nodiscard]] core::Config& config();

    // The chosen provider (--provider, else the configured one); an error that
    // says how to choose one when there is none.
    [[nodiscard]] const ProviderEntry& provider_entry();
    [[nodiscard]] CapabilityMatrix capabilities();

    // The capability gate: Supported passes; NotAvailable/UnderDevelopment throw
    // (exit 2); ManualWorkaround prints the plan and throws (exit 3) unless
    // --force-partial, in which case it prints the plan as a warning and passes.
    void gate(Feature feature);

    // Creates the provider (after the caller has gated its feature).
    [[nodiscard]] Provider& provider();

    // Serialises agentctl processes acting on one sandbox; held until the session ends.
    void lock_instance(const std::string& name);

    [[nodiscard]] ProcessRunner& runner();
    [[nodiscard]] const HostPlatform& platform();
    [[nodiscard]] std::string self_exe() const;

private:
    struct State;
    GlobalOptions& m_globals;
    std::unique_ptr<State> m_state;
};

}  // namespace agentctl::cli
