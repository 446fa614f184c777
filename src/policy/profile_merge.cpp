// Layering two profile specs. A later layer can only tighten what an earlier
// one closed; docs/profiles.md lists the rule of every field.
#include <algorithm>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "policy/paths.hpp"
#include "policy/sandbox_spec.hpp"

namespace agentctl::policy {
namespace {

template <typename T>
void union_into(std::vector<T>& into, const std::vector<T>& from) {
    for (const auto& item : from) {
        if (std::find(into.begin(), into.end(), item) == into.end()) into.push_back(item);
    }
}

// The tighter of two optional booleans, where `tight` is the tighter value:
// an explicit tight value anywhere wins; otherwise whatever was set.
std::optional<bool> tighter(std::optional<bool> base, std::optional<bool> later, bool tight) {
    if (base == tight || later == tight) return tight;
    if (base || later) return !tight;
    return std::nullopt;
}

std::optional<bool> either(std::optional<bool> base, std::optional<bool> later) {
    if (base == true || later == true) return true;
    if (base || later) return false;
    return std::nullopt;
}

// Paths allowed by both lists: for each pair, the deeper one if it lies under
// the other. Compared by path segment, lexically (symlinks make it smaller,
// never larger: a root that is a symlink elsewhere simply stops matching).
std::vector<std::string> intersect_roots(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<std::string> out;
    for (const auto& x : a) {
        for (const auto& y : b) {
            const std::string* deeper = path_is_under(x, y) ? &x : path_is_under(y, x) ? &y : nullptr;
            if (deeper != nullptr && std::find(out.begin(), out.end(), *deeper) == out.end()) out.push_back(*deeper);
        }
    }
    return out;
}

}  // namespace

ProfileSpec merge_profile_specs(const ProfileSpec& base, const ProfileSpec& later) {
    ProfileSpec out = base;
    out.deny_lan = tighter(base.deny_lan, later.deny_lan, true);
    union_into(out.allow, later.allow);
    union_into(out.allow_presets, later.allow_presets);
    union_into(out.allow_files, later.allow_files);
    for (const auto& port : later.ports) {
        for (const auto& existing : out.ports) {
            if (existing.host_port == port.host_port && existing.protocol == port.protocol) {
                throw Error(fmt::format("host port {}/{} is forwarded twice by the profiles being layered",
                                        port.host_port, port.protocol),
                            "remove one of the two port entries");
            }
        }
        out.ports.push_back(port);
    }
    if (later.dns.servers) out.dns.servers = later.dns.servers;
    out.dns.disabled = either(base.dns.disabled, later.dns.disabled);
    // Upload budgets only tighten: the lowest of any layer wins, per destination and for the default.
    tighten_budgets(out.budgets, later.budgets);
    if (later.default_budget && (!out.default_budget || *later.default_budget < *out.default_budget)) {
        out.default_budget = later.default_budget;
    }
    if (later.resources.cpu_cores != 0) out.resources.cpu_cores = later.resources.cpu_cores;
    if (later.resources.memory_bytes != 0) out.resources.memory_bytes = later.resources.memory_bytes;
    if (later.resources.disk_bytes != 0) out.resources.disk_bytes = later.resources.disk_bytes;
    // The process limit only tightens: the lowest limit any layer sets wins.
    if (later.resources.processes != 0 &&
        (out.resources.processes == 0 || later.resources.processes < out.resources.processes)) {
        out.resources.processes = later.resources.processes;
    }
    out.mounts.insert(out.mounts.end(), later.mounts.begin(), later.mounts.end());
    if (base.mount_policy.allowed_roots && later.mount_policy.allowed_roots) {
        out.mount_policy.allowed_roots =
            intersect_roots(*base.mount_policy.allowed_roots, *later.mount_policy.allowed_roots);
    } else if (later.mount_policy.allowed_roots) {
        out.mount_policy.allowed_roots = later.mount_policy.allowed_roots;
    }
    union_into(out.mount_policy.deny_paths, later.mount_policy.deny_paths);
    out.mount_policy.allow_home = tighter(base.mount_policy.allow_home, later.mount_policy.allow_home, false);
    out.mount_policy.create_missing = either(base.mount_policy.create_missing, later.mount_policy.create_missing);
    if (!later.viewer.empty()) out.viewer = later.viewer;
    union_into(out.packages, later.packages);
    out.secrets.insert(out.secrets.end(), later.secrets.begin(), later.secrets.end());
    out.secret_forbids.insert(out.secret_forbids.end(), later.secret_forbids.begin(), later.secret_forbids.end());
    if (base.isolation == Isolation::Vm) {
        // an explicit vm stays
    } else if (later.isolation) {
        out.isolation = later.isolation;
        out.isolation_origin = later.isolation_origin;
    }
    return out;
}

}  // namespace agentctl::policy
