// The hyperv provider: a stub that answers honestly.
//
// Without --preview every method throws the capability message with exit code
// 2, so a caller that skipped the gate still learns what is missing. With
// --preview, create/start/stop/delete and apply_network_policy print the
// PowerShell they would run (plan.hpp) and run nothing.
#include "provider/hyperv/hyperv_provider.hpp"

#include <ostream>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "provider/hyperv/plan.hpp"
#include "provider/hyperv/powershell.hpp"

namespace agentctl::provider::hyperv {
namespace {

constexpr std::string_view k_name = "hyperv";

class HypervProvider final : public Provider {
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
    int exec(const std::string&, const ExecRequest&) override { refuse("exec"); }
    int shell(const std::string&, bool) override { refuse("shell"); }
    void view(const std::string&, bool) override { refuse("view"); }
    int logs(const std::string&, const LogRequest& request) override {
        refuse(request.kind == LogKind::Network ? Feature("logs.network") : Feature("logs.exec"));
    }
    void snapshot_create(const std::string&, const std::string&) override { refuse("snapshot.create"); }
    [[nodiscard]] std::vector<SnapshotInfo> snapshot_list(const std::string&) override { refuse("snapshot.list"); }
    void snapshot_restore(const std::string&, const std::string&) override { refuse("snapshot.restore"); }
    void snapshot_delete(const std::string&, const std::string&) override { refuse("snapshot.delete"); }
    void image_pull(const std::string&) override { refuse("image.pull"); }
    void image_build(const std::string&, const std::string&, const std::vector<std::string>&) override {
        refuse("image.build");
    }

private:
    // The same sentence, hint and exit code the gate gives for this feature.
    [[noreturn]] void refuse(Feature feature_name) const {
        const auto capability = m_capabilities.get(feature_name);
        const std::string_view feature = feature_name.name();
        std::string message;
        switch (capability.status) {
            case CapabilityStatus::ManualWorkaround:
                message =
                    fmt::format("{} on the {} provider needs manual steps: {}", feature, k_name, capability.message);
                break;
            case CapabilityStatus::NotAvailable:
                message =
                    fmt::format("{} is not available on the {} provider: {}", feature, k_name, capability.message);
                break;
            case CapabilityStatus::Supported:
            case CapabilityStatus::UnderDevelopment:
                message =
                    fmt::format("{} is under development on the {} provider: {}", feature, k_name, capability.message);
                break;
        }
        throw Error(std::move(message),
                    fmt::format("run `agentctl capabilities --provider {}` to see what it supports", k_name),
                    exit_code::k_not_available);
    }

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

std::unique_ptr<Provider> create(ProviderContext& context) { return std::make_unique<HypervProvider>(context); }

}  // namespace agentctl::provider::hyperv
