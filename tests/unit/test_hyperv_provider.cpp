// The hyperv provider object: without --preview every call refuses with the
// capability message and exit code 2; with --preview the lifecycle calls print
// their plan and run nothing; the parts without a plan are not there at all.
#include <catch2/catch.hpp>

#include <functional>
#include <sstream>

#include "agentctl/error.hpp"
#include "provider/hyperv/hyperv_provider.hpp"
#include "provider/hyperv/plan.hpp"
#include "provider/hyperv/powershell.hpp"
#include "support/provider_context.hpp"

using namespace agentctl;

namespace {

// Records every request and runs none: nothing in this provider may start a process.
class RecordingRunner final : public ProcessRunner {
public:
    ProcessResult run(const ProcessRequest& request) override {
        requests.push_back(request);
        return ProcessResult{1, 0, false, false, {}, "not run in tests"};
    }
    std::vector<ProcessRequest> requests;
};

class Platform final : public HostPlatform {
public:
    [[nodiscard]] bool is_macos() const override { return false; }
    [[nodiscard]] std::string sandbox_exec_path() const override { return "/usr/bin/sandbox-exec"; }
};

class RecordingReporter final : public Reporter {
public:
    void step(std::string_view message) override { steps.emplace_back(message); }
    void notice(std::string_view message) override { notices.emplace_back(message); }
    void warning(std::string_view message) override { warnings.emplace_back(message); }
    std::vector<std::string> steps, notices, warnings;
};

struct Fixture {
    explicit Fixture(bool preview)
        : context{.runner = runner,
                  .platform = platform,
                  .reporter = reporter,
                  .out = out,
                  .mount_checker = mounts,
                  .preview = preview,
                  .config_dir = "/home/me/.config/agentctl",
                  .self_exe = "/usr/bin/agentctl",
                  .state_dir = "/home/me/.local/state/agentctl",
                  .runtime_dir = "/home/me/.local/state/agentctl/run"},
          provider(provider::hyperv::create(context)) {}

    RecordingRunner runner;
    Platform platform;
    RecordingReporter reporter;
    std::ostringstream out;
    test::NoMountChecker mounts;
    ProviderContext context;
    std::unique_ptr<Provider> provider;
};

SandboxSpec spec() {
    SandboxSpec s;
    s.name = "tbox";
    s.image = "D:\\images\\base image.vhdx";
    s.resources = {2, 4ull << 30, 0};
    s.mounts = {Mount{"/home/me/agentctl/workspaces/tbox", "/workspace", true, "profile default"}};
    return s;
}

// The gate's wording for an UnderDevelopment feature.
std::string gate_message(Feature feature) {
    return std::string(feature.name()) + " is under development on the hyperv provider: " +
           provider::hyperv::capabilities(Platform()).get(feature).message;
}

void check_refuses(const std::function<void()>& call, Feature feature) {
    INFO(feature);
    try {
        call();
        FAIL("no error");
    } catch (const Error& error) {
        CHECK(error.code() == exit_code::k_not_available);
        CHECK(std::string(error.what()) == gate_message(feature));
        CHECK(error.hint() == "run `agentctl capabilities --provider hyperv` to see what it supports");
    }
}

std::string lines_of(const provider::hyperv::Plan& plan) {
    std::string text;
    for (const auto& script : plan.scripts) text += provider::hyperv::preview_line(script) + "\n";
    return text;
}

}  // namespace

TEST_CASE("without preview every method refuses with exit code 2 and the capability message", "[hyperv][provider]") {
    Fixture f(false);
    auto& p = *f.provider;
    CHECK(p.name() == "hyperv");
    auto& life = p.lifecycle();
    check_refuses([&] { life.create(spec()); }, "create");
    check_refuses([&] { life.start("tbox", {}); }, "start");
    check_refuses([&] { life.stop("tbox", {}); }, "stop");
    check_refuses([&] { life.remove("tbox", true); }, "delete");
    check_refuses([&] { (void)life.list(); }, "list");
    check_refuses([&] { (void)life.status("tbox"); }, "status");
    REQUIRE(p.egress_policy() != nullptr);
    check_refuses([&] { p.egress_policy()->apply_network_policy("tbox", policy::NetworkPolicy{}); }, "network.acl");
    CHECK(f.runner.requests.empty());
    CHECK(f.out.str().empty());
}

TEST_CASE("the parts without a plan are absent, and the matrix keeps even a preview from them", "[hyperv][provider]") {
    Fixture f(true);
    auto& p = *f.provider;
    CHECK(p.commands() == nullptr);
    CHECK(p.console() == nullptr);
    CHECK(p.egress_log() == nullptr);
    CHECK(p.snapshots() == nullptr);
    CHECK(p.images() == nullptr);
    const auto matrix = provider::hyperv::capabilities(Platform());
    for (Feature feature :
         {Feature("exec"), Feature("shell"), Feature("view"), Feature("logs.network"), Feature("logs.exec"),
          Feature("snapshot.create"), Feature("snapshot.list"), Feature("snapshot.restore"), Feature("snapshot.delete"),
          Feature("image.pull"), Feature("image.build")}) {
        INFO(feature);
        CHECK(!matrix.implemented(feature));
        CHECK(matrix.get(feature).status == CapabilityStatus::UnderDevelopment);
    }
    for (Feature feature :
         {Feature("create"), Feature("start"), Feature("stop"), Feature("delete"), Feature("network.acl")}) {
        INFO(feature);
        CHECK(matrix.implemented(feature));
    }
}

TEST_CASE("preview: create prints the create plan, one shell-quoted line per step", "[hyperv][provider]") {
    Fixture f(true);
    f.provider->lifecycle().create(spec());
    const auto layout = provider::hyperv::layout_for("tbox", "/home/me/.local/state/agentctl");
    const auto plan = provider::hyperv::create_plan(spec(), layout);
    CHECK(f.out.str() == lines_of(plan));
    CHECK_THAT(f.out.str(), Catch::Contains("-ParentPath '\\''D:\\images\\base image.vhdx'\\''"));
    REQUIRE(f.reporter.warnings.size() == 1);
    CHECK_THAT(f.reporter.warnings.front(), Catch::Contains("stub"));
    CHECK(f.reporter.notices == plan.notes);
    CHECK(f.runner.requests.empty());
}

TEST_CASE("preview: start, stop, delete and policy print their plans", "[hyperv][provider]") {
    Fixture f(true);
    const auto layout = provider::hyperv::layout_for("tbox", "/home/me/.local/state/agentctl");
    f.provider->lifecycle().start("tbox", {});
    StopRequest force;
    force.force = true;
    f.provider->lifecycle().stop("tbox", force);
    f.provider->lifecycle().remove("tbox", false);
    policy::NetworkPolicy network;
    network.allow_lan = true;
    f.provider->egress_policy()->apply_network_policy("tbox", network);
    CHECK(f.out.str() == lines_of(provider::hyperv::start_plan(layout, {})) +
                             lines_of(provider::hyperv::stop_plan(layout, force)) +
                             lines_of(provider::hyperv::remove_plan(layout, false)) +
                             lines_of(provider::hyperv::replace_network_policy_plan(layout, network)));
    CHECK(f.runner.requests.empty());
}

TEST_CASE("preview: no plan is invented where none exists", "[hyperv][provider]") {
    Fixture f(true);
    check_refuses([&] { (void)f.provider->lifecycle().list(); }, "list");
    check_refuses([&] { (void)f.provider->lifecycle().status("tbox"); }, "status");
    CHECK(f.out.str().empty());
}

TEST_CASE("preview: create of a spec Hyper-V cannot express fails before printing", "[hyperv][provider]") {
    Fixture f(true);
    auto udp = spec();
    udp.ports = {PortForward{"127.0.0.1", 5353, 53, "udp"}};
    try {
        f.provider->lifecycle().create(udp);
        FAIL("no error");
    } catch (const Error& error) {
        CHECK(error.code() == exit_code::k_not_available);
    }
    CHECK(f.out.str().empty());
}
