// Building the Debian image with debootstrap: a plan (pure) and its run.
#include "provider/incus/lifecycle/image_bootstrap.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "core/files.hpp"
#include "agentctl/hash.hpp"
#include "policy/catalog.hpp"
#include "policy/sandbox_spec.hpp"
#include "provider/common/command_output.hpp"
#include "provider/incus/guest/guest_scripts.hpp"
#include "provider/incus/client/payloads.hpp"

namespace agentctl::provider::incus {
namespace {

namespace fs = std::filesystem;

// What agentctl needs in a guest: an init, udev for eth0, the tools its
// guest scripts and the curl installers use, sudo for --root, and git, which
// every coding agent works with (over HTTPS through the egress proxy, a token
// binding's placeholder as its password). Not npm: Debian's npm does not
// configure inside debootstrap's minbase build, so the agents installed from
// npm ask for it (`--package nodejs --package npm`).
constexpr const char* k_base_packages[] = {"systemd-sysv",    "udev", "curl", "python3-minimal", "iproute2", "sudo",
                                           "ca-certificates", "git"};

// What a build puts into an image besides its packages, by revision: a
// cached tarball of an earlier revision is built anew (2: the accounts are
// recorded as image properties).
constexpr int k_build_revision = 2;

// A short, stable name for a package list: the cached tarball of another
// list is another file, so a changed list is built anew.
std::string list_digest(std::string_view list) { return fmt::format("{:08x}", fnv1a32(list)); }

constexpr std::string_view k_networkd_unit =
    "[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n";
// What a container does not need at boot, each skipped in containers only
// (`ConditionVirtualization=!container`, so a VM from the same root file
// system still gets them): udev and networkd (LXC sets a container's address
// and route before its init runs), kernel module loading, the ext4 scrub.
// On a 2-core host they are most of a container's boot, which runs while
// `create` sets up the sandbox.
constexpr const char* k_vm_only_units[] = {"systemd-udevd.service",    "systemd-udev-trigger.service",
                                           "systemd-networkd.service", "systemd-network-generator.service",
                                           "modprobe@.service",        "systemd-modules-load.service",
                                           "e2scrub_reap.service",     "systemd-networkd-wait-online.service"};
constexpr std::string_view k_vm_only_dropin = "[Unit]\nConditionVirtualization=!container\n";
constexpr std::string_view k_hostname_template = "{{ instance.name }}\n";
constexpr std::string_view k_hosts_template =
    "127.0.0.1 localhost\n127.0.1.1 {{ instance.name }}\n::1 localhost ip6-localhost ip6-loopback\n";

std::string machine_architecture() {
    struct utsname name {};
    if (::uname(&name) != 0) return "x86_64";
    return name.machine;
}

std::string debian_architecture(const std::string& incus) {
    if (incus == "x86_64") return "amd64";
    if (incus == "aarch64") return "arm64";
    return incus;
}

ProcessResult run_stage(ProviderContext& context, const std::string& what, const std::vector<std::string>& argv,
                        std::chrono::seconds timeout) {
    ProcessRequest request;
    request.argv = argv;
    request.timeout = timeout;
    auto result = context.runner.run(request);
    if (!result.ok()) {
        const auto output = common::output_tail(result.err.empty() ? result.out : result.err);
        throw Error(fmt::format("image build: {} failed ({}): {}", what, result.ending(), output),
                    fmt::format("the command was: {}", shell_join(argv)));
    }
    return result;
}

void remove_matching(const fs::path& dir, std::string_view suffix) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (suffix.empty() || entry.path().filename().string().ends_with(suffix)) fs::remove_all(entry.path(), ec);
    }
}

}  // namespace

std::optional<std::string> string_property(const Json& properties, std::string_view key) {
    if (!properties.is_object()) return std::nullopt;
    const auto it = properties.find(std::string(key));
    if (it == properties.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}

Json accounts_properties(const ImageAccounts& accounts) {
    return Json{{std::string(k_image_passwd_property), accounts.passwd},
                {std::string(k_image_group_property), accounts.group}};
}

Json accounts_binding(const Json& image) {
    Json properties = image.value("properties", Json::object());
    properties[std::string(k_image_accounts_of_property)] = image.value("fingerprint", "");
    return Json{{"properties", std::move(properties)}};
}

std::optional<ImageAccounts> recorded_accounts(const Json& image) {
    const auto properties = image.value("properties", Json::object());
    const auto of = string_property(properties, k_image_accounts_of_property);
    if (!of || of->empty() || *of != image.value("fingerprint", "")) return std::nullopt;
    auto passwd = string_property(properties, k_image_passwd_property);
    auto group = string_property(properties, k_image_group_property);
    if (!passwd || !group) return std::nullopt;
    return ImageAccounts{std::move(*passwd), std::move(*group)};
}

std::string image_metadata(const BootstrapOptions& options, const BootstrapPlan& plan, const ImageAccounts* accounts) {
    auto text =
        fmt::format("architecture: {}\ncreation_date: {}\nproperties:\n", plan.architecture, options.creation_date);
    // Each value as a JSON string, which YAML reads as a double-quoted scalar.
    for (const auto& [key, value] : plan.properties) text += fmt::format("  {}: {}\n", key, Json(value).dump());
    if (accounts) {
        const auto recorded = accounts_properties(*accounts);
        for (const auto& [key, value] : recorded.items()) text += fmt::format("  {}: {}\n", key, value.dump());
    }
    return text +
           "templates:\n"
           "  /etc/hostname: {when: [create, copy], template: hostname.tpl}\n"
           "  /etc/hosts: {when: [create, copy], template: hosts.tpl}\n";
}

BootstrapPlan bootstrap_plan(const BootstrapOptions& options) {
    BootstrapPlan plan;
    const auto architecture = options.architecture.empty() ? machine_architecture() : options.architecture;
    std::vector<std::string> names(std::begin(k_base_packages), std::end(k_base_packages));
    for (const auto& neutral : options.packages) {
        for (const auto& name : policy::package_names_for(neutral, policy::PackageManager::Apt)) {
            if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);  // once
        }
    }
    std::string include;
    for (const auto& name : names) include.append(include.empty() ? "" : ",").append(name);
    plan.tarball =
        (fs::path(options.cache_dir) /
         fmt::format("{}-{}.tar.zst", options.alias, list_digest(fmt::format("{}/{}", k_build_revision, include))))
            .string();
    plan.work_dir = (fs::path(options.cache_dir) / ("build-" + options.alias)).string();
    auto carried = include;
    std::replace(carried.begin(), carried.end(), ',', ' ');
    const auto root = (fs::path(plan.work_dir) / "rootfs").string();
    plan.debootstrap = {"debootstrap", "--variant=minbase", "--include=" + include, options.suite,
                        root,          options.mirror};
    plan.enable_networkd = {"chroot", root, "systemctl", "enable", "systemd-networkd"};
    plan.networkd_unit = std::string(k_networkd_unit);
    // The default sandbox user, made once here instead of in every create
    // (the create's bootstrap finds it and only moves it to another uid when
    // the writable mounts need one).
    const auto user = std::string(policy::k_default_user);
    plan.add_user = {"chroot", root, "/bin/sh", "-c",
                     fmt::format("groupadd -g {0} {1} && useradd -m -u {0} -g {1} -c '{2}' -s /bin/bash {1}",
                                 k_default_guest_uid, user, k_image_user_comment)};
    for (const char* unit : k_vm_only_units) {
        plan.dropins.emplace_back(fmt::format("etc/systemd/system/{}.d/agentctl-container.conf", unit),
                                  std::string(k_vm_only_dropin));
    }
    plan.architecture = architecture;
    plan.properties = {{"description", "Debian 12 minbase (agentctl)"},
                       {"os", "debian"},
                       {"release", options.suite},
                       {"architecture", debian_architecture(architecture)},
                       {std::string(k_image_packages_property), carried}};
    plan.pack = {"tar", "--numeric-owner", "--xattrs",      "-I",        "zstd -T0 -3", "-cf", plan.tarball + ".tmp",
                 "-C",  plan.work_dir,     "metadata.yaml", "templates", "rootfs"};
    plan.import = {"incus", "image", "import", plan.tarball};
    if (!options.remote.empty()) plan.import.push_back(options.remote + ":");
    if (!options.project.empty()) plan.import.insert(plan.import.end(), {"--project", options.project});
    plan.import.insert(plan.import.end(), {"--alias", options.alias});
    return plan;
}

void build_bootstrap_image(ProviderContext& context, const BootstrapOptions& options) {
    const auto plan = bootstrap_plan(options);
    const auto root = fs::path(plan.work_dir) / "rootfs";
    if (context.preview) {
        for (const auto* argv : {&plan.debootstrap, &plan.enable_networkd, &plan.add_user, &plan.pack, &plan.import}) {
            context.out << shell_join(*argv) << '\n';
        }
        return;
    }
    std::error_code ec;
    if (!fs::exists(plan.tarball, ec)) {
        if (::geteuid() != 0) {
            throw Error("image build needs root: debootstrap and chroot build the root file system",
                        "run it as root (sudo agentctl image build " + options.alias + ")");
        }
        fs::remove_all(plan.work_dir, ec);
        fs::create_directories(plan.work_dir);
        try {
            context.reporter.step(
                fmt::format("debootstrap {} from {} (about a minute)", options.suite, options.mirror));
            run_stage(context, "debootstrap", plan.debootstrap, std::chrono::minutes(30));
            context.reporter.step("configuring eth0 (systemd-networkd, DHCP)");
            core::write_file_atomic(root / "etc/systemd/network/10-eth0.network", plan.networkd_unit, 0644);
            run_stage(context, "enabling systemd-networkd", plan.enable_networkd, std::chrono::minutes(2));
            context.reporter.step(
                fmt::format("adding the sandbox user {} (uid {})", policy::k_default_user, k_default_guest_uid));
            run_stage(context, "adding the sandbox user", plan.add_user, std::chrono::minutes(2));
            for (const auto& [path, content] : plan.dropins) core::write_file_atomic(root / path, content, 0644);
            remove_matching(root / "var/cache/apt/archives", ".deb");
            remove_matching(root / "var/cache/apt", ".bin");
            remove_matching(root / "var/lib/apt/lists", "");
            core::write_file_atomic(root / "etc/machine-id", "", 0444);
            const ImageAccounts accounts{core::read_file(root / "etc/passwd"), core::read_file(root / "etc/group")};
            core::write_file_atomic(fs::path(plan.work_dir) / "metadata.yaml", image_metadata(options, plan, &accounts),
                                    0644);
            core::write_file_atomic(fs::path(plan.work_dir) / "templates/hostname.tpl", k_hostname_template, 0644);
            core::write_file_atomic(fs::path(plan.work_dir) / "templates/hosts.tpl", k_hosts_template, 0644);
            context.reporter.step(fmt::format("packing {}", plan.tarball));
            run_stage(context, "packing the image", plan.pack, std::chrono::minutes(10));
            fs::rename(plan.tarball + ".tmp", plan.tarball);
        } catch (...) {
            fs::remove_all(plan.work_dir, ec);
            fs::remove(plan.tarball + ".tmp", ec);
            throw;
        }
        fs::remove_all(plan.work_dir, ec);
    } else {
        context.reporter.notice(fmt::format("using the cached image tarball {} (delete it to rebuild)", plan.tarball));
    }
    context.reporter.step(fmt::format("importing {} as image {}", plan.tarball, options.alias));
    run_stage(context, "importing the image", plan.import, std::chrono::minutes(10));
}

}  // namespace agentctl::provider::incus
