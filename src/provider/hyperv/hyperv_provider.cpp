// The hyperv provider: a stub that answers honestly.
//
// Without --preview every method throws the capability message with exit code
// 2, so a caller that skipped the gate still learns what is missing. With
// --preview, create/start/stop/delete and apply_network_policy print the
// PowerShell they would run (plan.hpp) and run nothing. It has no other parts.
#include "provider/hyperv/hyperv_provider.hpp"

#include <ostream>

#include "agentctl/error.hpp"
#include "provider/hyperv/plan.hpp"
#include "provider/hyperv/powershell.hpp"

namespace agentctl::provider::hyperv {
namespace {

constexpr std::string_view k_name = "hyperv";

// Lifecycle and EgressPolicy are the parts with a plan to print; the rest of
// Hyper-V's features are UnderDevelopment without code, so the gate refuses
// them even under --preview.
class HypervProvider final : public Implements<Lifecycle, EgressPolicy> {
public:
    explicit HypervProvider(ProviderContext& context)
        : m_context(context), m_capabilities(hyperv::capabilities(context.platform)) {}

    [[nodiscard]] std::string_view name() const override { return k_name; }

    void create(const SandboxSpec& spec) override {
        require_preview("create");
        print(create_plan(spec, layout(spec.name)));
    }

    void start(const std::string& name, const StartRequest& request) override {
        require_preview("start");
        print(start_plan(layout(name), request));
    }

    void stop(const std::string& name, const StopRequest& request) override {
        require_preview("stop");
        print(stop_plan(layout(name), request));
    }

    void remove(const std::string& name, bool force) override {
        require_preview("delete");
        print(remove_plan(layout(name), force));
    }

    void apply_network_policy(const std::string& name, const policy::NetworkPolicy& network) override {
        require_preview("network.acl");
        print(replace_network_policy_plan(layout(name), network));
    }

    // No plan exists for these yet: they refuse even under --preview.
    [[nodiscard]] std::vector<InstanceInfo> list() override { refuse("list"); }
    [[nodiscard]] InstanceInfo status(const std::string&) override { refuse("status"); }

private:
    // The same sentence, hint and exit code the gate gives for this feature.
    [[noreturn]] void refuse(Feature feature) const { throw refusal(k_name, feature, m_capabilities.get(feature)); }

    void require_preview(Feature feature) const {
        if (!m_context.preview) refuse(feature);
    }

    [[nodiscard]] Layout layout(std::string_view name) const { return layout_for(name, m_context.state_dir); }

    void print(const Plan& plan) const {
        m_context.reporter.warning(
            "the hyperv provider is a stub: these are the commands it would run on a Hyper-V host; none has been "
            "run or verified there");
        for (const auto& script : plan.scripts) m_context.out << preview_line(script) << '\n';
        for (const auto& note : plan.notes) m_context.reporter.notice(note);
    }

    ProviderContext& m_context;
    CapabilityMatrix m_capabilities;
};

}  // namespace

CapabilityMatrix base_capabilities() { return HypervProvider::base_capabilities(); }

std::unique_ptr<Provider> create(ProviderContext& context) { return std::make_unique<HypervProvider>(context); }

}  // namespace agentctl::provider::hyperv
