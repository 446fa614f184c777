// Mount resolution: expand, clean, check, create, resolve symlinks, check again.
#include "policy/mounts.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

namespace agentctl::policy {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view k_system_guest_paths[] = {"/",     "/etc", "/usr",  "/bin", "/sbin", "/lib",  "/lib64",
                                                     "/boot", "/dev", "/proc", "/sys", "/var",  "/root", "/run"};

constexpr std::string_view k_home_denied[] = {".ssh",
                                              ".gnupg",
                                              ".aws",
                                              ".config/gcloud",
                                              ".kube",
                                              ".docker",
                                              ".lima",
                                              ".local/share/incus",
                                              ".config/incus",
                                              ".config/agentctl",
                                              ".local/state/agentctl"};

constexpr std::string_view k_incus_state[] = {"/var/lib/incus", "/var/cache/incus", "/var/log/incus", "/run/incus"};

constexpr int k_max_symlinks = 40;  // as the kernel's ELOOP limit

// Resolves `path` (absolute) the way the kernel would, one component at a
// time: symlinks are followed even when their target does not exist yet (so a
// dangling link into ~/.ssh is judged as ~/.ssh), `..` goes to the parent of
// what was actually reached, and the part that does not exist is kept as
// written. nullopt when there are too many links.
std::optional<std::string> resolve_path(const std::string& path) {
    std::vector<std::string> pending;  // components still to walk, last one first
    auto push_components = [&](std::string_view text) {
        std::vector<std::string> parts;
        while (!text.empty()) {
            auto slash = text.find('/');
            auto part = text.substr(0, slash);
            if (!part.empty()) parts.emplace_back(part);
            text.remove_prefix(slash == std::string_view::npos ? text.size() : slash + 1);
        }
        pending.insert(pending.end(), parts.rbegin(), parts.rend());
    };
    push_components(path);
    std::string current = "/";
    int links = 0;
    while (!pending.empty()) {
        std::string part = std::move(pending.back());
        pending.pop_back();
        if (part == ".") continue;
        if (part == "..") {
            auto slash = current.rfind('/');
            current = slash == 0 ? "/" : current.substr(0, slash);
            continue;
        }
        std::string next = current == "/" ? "/" + part : current + "/" + part;
        struct stat info {};
        if (::lstat(next.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
            if (++links > k_max_symlinks) return std::nullopt;
            std::error_code ec;
            auto target = fs::read_symlink(next, ec);
            if (ec) return std::nullopt;
            auto text = target.string();
            if (text.starts_with("/")) current = "/";
            push_components(text);
            continue;
        }
        current = std::move(next);
    }
    return current;
}

std::string canonical_prefix(const std::string& path) { return resolve_path(clean_path(path, "/")).value_or(path); }

bool valid_instance_name(std::string_view name) {
    if (name.empty() || name.size() > 63) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
    }
    return text;
}

// Every form of a denied directory that a canonical path could take: as
// written, and with symlinks resolved.
struct Checker {
    const MountContext& context;
    std::string home;
    std::vector<std::pair<std::string, std::string>> denied;  // (path, what it is)
    std::optional<std::vector<std::string>> roots;

    explicit Checker(const MountContext& c) : context(c), home(canonical_prefix(clean_path(c.home, "/"))) {
        auto add = [&](const std::string& path, const std::string& why) {
            denied.emplace_back(clean_path(path, "/"), why);
            auto canonical = canonical_prefix(clean_path(path, "/"));
            if (canonical != clean_path(path, "/")) denied.emplace_back(canonical, why);
        };
        for (const auto& path : builtin_denied_paths(c.home, c.config_dir, c.private_dirs))
            add(path, "credentials or backend state");
        for (const auto& path : c.policy.deny_paths) add(path, "listed in mountPolicy.denyPaths");
        if (c.policy.allowed_roots) {
            roots.emplace();
            for (const auto& root : *c.policy.allowed_roots) roots->push_back(canonical_prefix(clean_path(root, "/")));
        }
    }

    // What is wrong with mounting `path` (canonical), or an empty string.
    std::string problem(const std::string& path) const {
        if (path == "/") return "the root directory / cannot be mounted";
        if (path == home && !context.policy.allow_home.value_or(false)) {
            return "$HOME itself cannot be mounted (mountPolicy.allowHome is not set); mount a directory below it";
        }
        for (const auto& [denied_path, why] : denied) {
            if (path_is_under(path, denied_path)) return fmt::format("{} is refused ({})", denied_path, why);
            if (path_is_under(denied_path, path)) {
                return fmt::format("it contains {}, which is refused ({})", denied_path, why);
            }
        }
        if (roots) {
            bool inside = std::any_of(roots->begin(), roots->end(),
                                      [&](const std::string& root) { return path_is_under(path, root); });
            if (!inside) {
                std::string list;
                for (const auto& root : *roots) list += (list.empty() ? "" : ", ") + root;
                return fmt::format("it is not under an allowed root (mountPolicy.allowedRoots: {})",
                                   list.empty() ? "none" : list);
            }
        }
        return {};
    }
};

struct Pending {
    const MountRequest* request;
    std::string host;  // expanded and cleaned, symlinks not yet resolved
    std::string guest;
    bool create = false;
};

std::string describe(const MountRequest& request) {
    return fmt::format("mount {} ({})", request.host_path, request.origin.empty() ? "--mount" : request.origin);
}

constexpr std::string_view k_overlap_marker = " overlap in the guest";

void check_overlaps(const std::vector<Mount>& mounts, std::vector<std::string>& problems) {
    for (std::size_t i = 0; i < mounts.size(); ++i) {
        for (std::size_t j = i + 1; j < mounts.size(); ++j) {
            const auto& a = mounts[i];
            const auto& b = mounts[j];
            if (path_is_under(a.host_path, b.host_path) || path_is_under(b.host_path, a.host_path)) {
                problems.push_back(fmt::format("mounts {} ({}) and {} ({}) overlap on the host", a.host_path, a.origin,
                                               b.host_path, b.origin));
            }
            if (path_is_under(a.guest_path, b.guest_path) || path_is_under(b.guest_path, a.guest_path)) {
                problems.push_back(fmt::format("mounts {} ({}) and {} ({}){}", a.guest_path, a.origin, b.guest_path,
                                               b.origin, k_overlap_marker));
            }
        }
    }
}

[[noreturn]] void fail(const std::vector<std::string>& problems,
                       std::string_view hint =
                           "nothing was mounted or created; change the mount or the profile's "
                           "mountPolicy") {
    std::string message =
        problems.size() == 1 ? "a mount was refused:" : fmt::format("{} mounts were refused:", problems.size());
    for (const auto& problem : problems) message += "\n  " + problem;
    const bool overlap = std::any_of(problems.begin(), problems.end(), [](const std::string& problem) {
        return problem.find(k_overlap_marker) != std::string::npos;
    });
    if (overlap) {
        throw Error(message,
                    "nothing was mounted or created; give the --mount a guest path no other mount covers "
                    "(HOST:/GUEST), or exactly the other mount's guest path to replace it (e.g. "
                    "--mount ~/src/app:/workspace:w replaces the profile's /workspace), or pass --mount-only to "
                    "drop the profile's mounts");
    }
    throw Error(message, std::string(hint));
}

std::string guest_key(const MountRequest& request, const std::string& name) {
    if (request.guest_path.empty() || !request.guest_path.starts_with("/")) return {};
    return clean_path(replace_all(request.guest_path, "{{.Name}}", name), "/");
}

// A host path as the user wrote it (after {{.Name}}): ~ expanded, made
// absolute (`cleaned`), symlinks resolved (`resolved`), and checked against
// the mount policy; `problem` says what is wrong (empty: nothing).
struct HostPath {
    std::string cleaned;
    std::string resolved;
    std::string problem;
};

HostPath check_host_path(const std::string& host, const MountContext& context, const Checker& checker) {
    HostPath path;
    auto expanded = expand_tilde(host, context.home);
    if (!expanded) {
        path.problem = "only ~ and ~/ are expanded, not ~user";
        return path;
    }
    path.cleaned = clean_path(*expanded, context.cwd);
    auto resolved = resolve_path(path.cleaned);
    if (!resolved) {
        path.problem = fmt::format("too many symbolic links below {}", path.cleaned);
        return path;
    }
    path.resolved = *resolved;
    path.problem = checker.problem(path.resolved);
    return path;
}

// The first pass over one request, before anything is created: expand ~ and
// {{.Name}}, clean, resolve symlinks, and check what exists now. Adds the
// problem and returns nullopt when the request is refused.
std::optional<Pending> plan_mount(const MountRequest& request, const MountContext& context, const Checker& checker,
                                  std::vector<std::string>& problems) {
    auto refuse = [&](const std::string& problem) -> std::optional<Pending> {
        problems.push_back(fmt::format("{}: {}", describe(request), problem));
        return std::nullopt;
    };
    std::string host = request.host_path;
    std::string guest = request.guest_path;
    if (host.find("{{.Name}}") != std::string::npos || guest.find("{{.Name}}") != std::string::npos) {
        if (!valid_instance_name(context.name)) {
            return refuse(fmt::format("the sandbox name \"{}\" cannot be put into a path", context.name));
        }
        host = replace_all(host, "{{.Name}}", context.name);
        guest = replace_all(guest, "{{.Name}}", context.name);
    }
    const auto checked = check_host_path(host, context, checker);
    if (!checked.problem.empty()) return refuse(checked.problem);
    Pending item{&request, checked.cleaned, {}, false};
    item.guest = guest.empty() ? item.host : guest;
    if (!item.guest.starts_with("/")) return refuse(fmt::format("the guest path \"{}\" is not absolute", item.guest));
    item.guest = clean_path(item.guest, "/");
    if (std::find(std::begin(k_system_guest_paths), std::end(k_system_guest_paths), item.guest) !=
        std::end(k_system_guest_paths)) {
        return refuse(fmt::format("the guest path {} is a system directory of the guest", item.guest));
    }
    item.host = checked.resolved;  // from here on only the resolved path is used
    std::error_code ec;
    auto status = fs::symlink_status(item.host, ec);
    if (!fs::exists(status)) {
        if (!context.policy.create_missing.value_or(false)) {
            return refuse(fmt::format("{} does not exist (create it, or set mountPolicy.createMissing)", item.host));
        }
        item.create = true;
    } else if (!fs::is_directory(status)) {
        return refuse(fmt::format("{} is not a directory", item.host));
    }
    return item;
}

// createMissing, once every request passed its first checks: makes the
// missing directories (a writable one owned by created_directory_owner()
// when agentctl runs as root). Nothing under a dry run.
void create_missing_directories(const std::vector<Pending>& pending, const MountContext& context,
                                std::vector<std::string>& problems) {
    if (!context.create_directories) return;
    for (const auto& item : pending) {
        if (!item.create) continue;
        std::error_code ec;
        const bool existed = fs::exists(fs::symlink_status(item.host, ec));
        fs::create_directories(item.host, ec);  // the resolved path: no link is followed into a denied place
        if (ec) {
            problems.push_back(
                fmt::format("{}: cannot create {}: {}", describe(*item.request), item.host, ec.message()));
        } else if (!existed && item.request->writable && ::geteuid() == 0) {
            const auto owner = created_directory_owner();
            if (::lchown(item.host.c_str(), static_cast<uid_t>(owner.uid), static_cast<gid_t>(owner.gid)) != 0) {
                problems.push_back(fmt::format("{}: cannot hand {} to uid {}: {}", describe(*item.request), item.host,
                                               owner.uid, std::strerror(errno)));
            }
        }
    }
}

// The last pass over a planned mount: resolve again (the directory now
// exists, and a link may have appeared) and check the path that will be
// mounted. Adds the problem and returns nullopt when it is refused.
std::optional<Mount> check_planned(const Pending& item, const MountContext& context, const Checker& checker,
                                   std::vector<std::string>& problems) {
    auto again = resolve_path(item.host);
    std::error_code ec;
    // A directory left uncreated (dry run) is checked at the path creation would give it.
    const bool dry_run_missing = item.create && !context.create_directories;
    if (!again || (!dry_run_missing && !fs::is_directory(*again, ec))) {
        problems.push_back(fmt::format("{}: {} is not a directory", describe(*item.request), item.host));
        return std::nullopt;
    }
    if (auto problem = checker.problem(*again); !problem.empty()) {
        problems.push_back(fmt::format("{}: {}", describe(*item.request), problem));
        return std::nullopt;
    }
    return Mount{*again, item.guest, item.request->writable, item.request->origin};
}

}  // namespace

DirectoryOwner created_directory_owner() {
    if (::geteuid() != 0) return {static_cast<int>(::geteuid()), static_cast<int>(::getegid())};
    auto id_from = [](const char* name) {
        const char* text = std::getenv(name);
        if (text == nullptr || *text == '\0') return 0;
        char* end = nullptr;
        const long value = std::strtol(text, &end, 10);
        return *end == '\0' && value > 0 && value < 0x7fffffff ? static_cast<int>(value) : 0;
    };
    const int uid = id_from("SUDO_UID");
    const int gid = id_from("SUDO_GID");
    if (uid > 0 && gid > 0) return {uid, gid};
    return {};
}

std::vector<std::string> builtin_denied_paths(const std::string& home, const std::string& config_dir,
                                              const std::vector<std::string>& private_dirs) {
    std::vector<std::string> out;
    for (auto relative : k_home_denied) out.push_back(clean_path(home + "/" + std::string(relative), "/"));
    for (auto path : k_incus_state) out.emplace_back(path);
    std::vector<std::string> own{config_dir};
    own.insert(own.end(), private_dirs.begin(), private_dirs.end());
    for (const auto& dir : own) {
        if (dir.empty()) continue;
        auto clean = clean_path(dir, "/");
        if (std::find(out.begin(), out.end(), clean) == out.end()) out.push_back(clean);
    }
    return out;
}

MountLayering layer_mount_flags(std::vector<MountRequest> earlier, const std::vector<MountRequest>& added,
                                const std::string& name) {
    MountLayering out;
    for (const auto& flag : added) {
        auto key = guest_key(flag, name);
        if (key.empty()) continue;
        auto replaced = std::stable_partition(earlier.begin(), earlier.end(), [&](const MountRequest& request) {
            return guest_key(request, name) != key;
        });
        for (auto it = replaced; it != earlier.end(); ++it) {
            out.notices.push_back(fmt::format("--mount {}:{} replaces the mount of {} at {} ({})", flag.host_path, key,
                                              replace_all(it->host_path, "{{.Name}}", name), key,
                                              it->origin.empty() ? "an earlier mount" : it->origin));
        }
        earlier.erase(replaced, earlier.end());
    }
    out.requests = std::move(earlier);
    out.requests.insert(out.requests.end(), added.begin(), added.end());
    return out;
}

MountRequest parse_mount_flag(std::string_view text) {
    std::vector<std::string_view> parts;
    std::string_view rest = text;
    while (true) {
        auto colon = rest.find(':');
        parts.push_back(rest.substr(0, colon));
        if (colon == std::string_view::npos) break;
        rest.remove_prefix(colon + 1);
    }
    auto bad = [&](std::string_view what) -> MountRequest {
        throw Error(fmt::format("invalid --mount \"{}\": {}", text, what),
                    "write --mount HOST_PATH[:GUEST_PATH][:w|:ro], e.g. --mount ~/src/app:/workspace/app:w");
    };
    MountRequest request;
    request.origin = "--mount";
    if (parts.size() >= 2 && (parts.back() == "w" || parts.back() == "ro")) {
        request.writable = parts.back() == "w";
        parts.pop_back();
    }
    if (parts.size() > 2) return bad("too many ':' (host paths containing ':' are not supported)");
    if (parts[0].empty()) return bad("the host path is empty");
    request.host_path = std::string(parts[0]);
    if (parts.size() == 2) {
        if (!parts[1].starts_with("/")) return bad(fmt::format("the guest path \"{}\" is not absolute", parts[1]));
        request.guest_path = std::string(parts[1]);
    }
    return request;
}

std::vector<Mount> resolve_mounts(const std::vector<MountRequest>& requests, const MountContext& context) {
    Checker checker(context);
    std::vector<std::string> problems;
    std::vector<Pending> pending;
    for (const auto& request : requests) {
        if (auto item = plan_mount(request, context, checker, problems)) pending.push_back(std::move(*item));
    }
    if (!problems.empty()) fail(problems);
    create_missing_directories(pending, context, problems);
    if (!problems.empty()) fail(problems);
    std::vector<Mount> mounts;
    for (const auto& item : pending) {
        if (auto mount = check_planned(item, context, checker, problems)) mounts.push_back(std::move(*mount));
    }
    check_overlaps(mounts, problems);
    if (!problems.empty()) fail(problems);
    return mounts;
}

void recheck_mounts(const std::vector<Mount>& recorded, const MountContext& context) {
    Checker checker(context);
    std::vector<std::string> problems;
    for (const auto& mount : recorded) {
        const auto what = fmt::format("mount {} -> {} ({})", mount.host_path, mount.guest_path,
                                      mount.origin.empty() ? "recorded" : mount.origin);
        auto resolved = resolve_path(mount.host_path);
        if (!resolved) {
            problems.push_back(fmt::format("{}: too many symbolic links below {}", what, mount.host_path));
            continue;
        }
        if (*resolved != mount.host_path) {
            problems.push_back(
                fmt::format("{}: the recorded path {} now resolves to {} (a symbolic link was put in "
                            "its place since it was checked)",
                            what, mount.host_path, *resolved));
            continue;
        }
        if (auto problem = checker.problem(*resolved); !problem.empty()) {
            problems.push_back(fmt::format("{}: {}", what, problem));
            continue;
        }
        std::error_code ec;
        if (!fs::is_directory(fs::symlink_status(*resolved, ec))) {
            problems.push_back(fmt::format("{}: {} is no longer a directory", what, *resolved));
        }
    }
    check_overlaps(recorded, problems);
    if (!problems.empty()) {
        fail(problems,
             "nothing was started; restore the directory, or give the sandbox other mounts (start "
             "--mount-only/--mount-none)");
    }
}

std::string check_copy_path(const std::string& path, const MountContext& context) {
    const auto checked = check_host_path(path, context, Checker(context));
    if (!checked.problem.empty()) {
        throw Error(fmt::format("cp: {}: {}", path, checked.problem),
                    "agentctl copies only host paths it would mount (docs/profiles.md, mountPolicy)");
    }
    return checked.resolved;
}

}  // namespace agentctl::policy
