// What every command needs: the global options, the configuration, the chosen
// provider behind its capability gate, and the streams to print to.
#pragma once

#include <filesystem>
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
    std::string remote;    // --remote (Incus); empty: the configured incus.remote, else the local daemon
    std::string project;   // --project (Incus); empty: the configured incus.project, else the remote's
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
    // Where a command prints its result. With --preview --output json this is
    // collected, and finish() prints one JSON document holding it and the
    // backend commands the preview printed.
    [[nodiscard]] std::ostream& out();
    // Prints a command's result on out(): make_json() (a JSON document) with
    // --output json, else make_text().
    template <class MakeJson, class MakeText>
    void print_result(MakeJson&& make_json, MakeText&& make_text) {
        if (json()) {
            out() << make_json().dump(2) << "\n";
        } else {
            out() << make_text();
        }
    }
    [[nodiscard]] Reporter& reporter();

    // Prints what out() collected (see out()); called once the command ended.
    void finish();
    // The command failed: the running progress step is shown as failed.
    void fail_step();

    // Loaded on first use, so commands that need no configuration never fail on it.
    [[nodiscard]] core::Config& config();

    // The chosen provider (--provider, else the configured one); an error that
    // says how to choose one when there is none.
    [[nodiscard]] const ProviderEntry& provider_entry();
    [[nodiscard]] CapabilityMatrix capabilities();

    // The capability gate: Supported passes; NotAvailable/UnderDevelopment throw
    // (exit 2), except that a preview of an UnderDevelopment feature the
    // provider has code for passes with a warning; ManualWorkaround prints the
    // plan and throws (exit 3) unless --force-partial, in which case it prints
    // the plan as a warning and passes.
    void gate(Feature feature);

    // Creates the provider (after the caller has gated its feature).
    [[nodiscard]] Provider& provider();
    // The provider's parts (provider.hpp). The caller gates a feature of the
    // part first; the matrix then guarantees the provider has it.
    [[nodiscard]] Lifecycle& lifecycle();
    [[nodiscard]] Commands& commands();
    [[nodiscard]] Console& console();
    [[nodiscard]] EgressLog& egress_log();
    [[nodiscard]] Snapshots& snapshots();
    [[nodiscard]] Images& images();
    [[nodiscard]] EgressPolicy& egress_policy();
    [[nodiscard]] Collector& collector();
    [[nodiscard]] WarmPool& warm_pool();

    // Serialises agentctl processes acting on one sandbox; held until the session
    // ends. Says so on stderr when it has to wait for another agentctl. A name
    // this session holds already is not locked again.
    void lock_instance(const std::string& name);

    // core::state_dir() and core::runtime_dir(), made private (0700) on first
    // use; state left below the config directory by older versions is moved
    // to the state directory first. With --preview nothing is created or moved.
    [[nodiscard]] const std::filesystem::path& state_dir();
    [[nodiscard]] const std::filesystem::path& runtime_dir();

    [[nodiscard]] ProcessRunner& runner();
    [[nodiscard]] const HostPlatform& platform();
    [[nodiscard]] std::string self_exe() const;

private:
    [[nodiscard]] bool collecting() const;
    struct State;
    GlobalOptions& m_globals;
    std::unique_ptr<State> m_state;
};

}  // namespace agentctl::cli
