#include "provider/lima/lima_provider.hpp"

#include <initializer_list>

#include "provider/lima/lima_backend.hpp"

namespace agentctl::provider::lima {

CapabilityMatrix capabilities(const HostPlatform& platform) {
    // Supported: every feature of the parts LimaBackend implements. Below, what differs and why.
    auto m = LimaBackend::base_capabilities();
    if (!platform.is_macos()) {
        const char* why =
            "Lima's egress is confined with macOS's sandbox-exec and a per-instance egress proxy, which only exist on "
            "macOS; on this host agentctl cannot confine a Lima instance's network. Use the incus provider on Linux, "
            "or create the sandbox with --no-network-policy to accept unrestricted egress";
        m.set("network.acl", CapabilityStatus::NotAvailable, why);
        m.set("network.deny-lan", CapabilityStatus::NotAvailable, why);
        // Secrets are injected by the egress proxy, which a Lima sandbox has only when confined.
        m.set("network.credentials", CapabilityStatus::NotAvailable, why);
    }
    const char* snapshots =
        "`limactl snapshot` is marked experimental and unstable upstream; agentctl will not build on it until it "
        "stabilises. Stop the sandbox and copy its Lima directory if you need a point-in-time copy";
    for (Feature feature :
         std::initializer_list<Feature>{"snapshot.create", "snapshot.list", "snapshot.restore", "snapshot.delete"}) {
        m.set(feature, CapabilityStatus::NotAvailable, snapshots);
    }
    m.set("image.pull", CapabilityStatus::NotAvailable,
          "Lima has no local image store: it fetches a template's base image lazily inside `limactl start`. Pass "
          "the template to `agentctl create --image` instead");
    m.set("image.build", CapabilityStatus::UnderDevelopment,
          "building images for Lima is not implemented yet; use a Lima template (--image) plus --package");
    m.set("view", CapabilityStatus::UnderDevelopment,
          "a VNC bridge for Lima's console is planned (never X11 forwarding); use `agentctl shell NAME`");
    m.set("logs.exec", CapabilityStatus::UnderDevelopment, "exec logging is not built yet on any provider");
    m.set("provision.packages", CapabilityStatus::UnderDevelopment,
          "installing --package on Lima is not built yet; install packages with `agentctl exec --root NAME -- ...`");
    m.set("placement.target", CapabilityStatus::NotAvailable,
          "a Lima instance runs on this machine; there are no cluster members to place it on (--target is for Incus "
          "clusters)");
    m.set("gc", CapabilityStatus::UnderDevelopment,
          "finding what an interrupted create left is not built on Lima; `agentctl delete NAME` removes a half-made "
          "instance and its proxy");
    m.set("pool", CapabilityStatus::NotAvailable,
          "a Lima VM boots in tens of seconds and cannot be renamed once made, so a pool of running VMs would hold "
          "one VM's memory per entry; the warm pool is the incus provider's (containers)");
    return m;
}

std::unique_ptr<Provider> create(ProviderContext& context) { return std::make_unique<LimaBackend>(context); }

}  // namespace agentctl::provider::lima
