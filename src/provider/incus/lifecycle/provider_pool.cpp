// The warm pool: sandboxes made ahead of time that a create takes.
//
// An entry is a whole sandbox, made by the same create as any other under a
// name of its own (k_pool_prefix and 8 hex digits): its bridge, ACL, firewall
// table, resolver and egress proxy exist and enforce a deny-all policy, and
// its instance runs, marked `user.agentctl.role=pool`, which keeps it out of
// `list` and from every verb that takes a sandbox's name. A create whose
// sandbox would be made exactly like the entries (pool_template_digest) takes
// one: under the entry's host lock it records the sandbox's name on the
// instance (k_name) and that the create is not finished, applies the
// sandbox's network policy as `policy add` would (ACL, firewall table,
// resolver, proxy), runs the probe battery and records its verdict with the
// end of the create. The instance, its bridge and its host state keep the
// entry's names; a sandbox's name is looked up through k_name when no
// instance has it (instance_of).
//
// Entries are made and removed only under the pool's host lock (fill and
// drain); a create takes one under the entry's own lock, which fill and
// drain take too before they remove an entry. After a create agentctl starts
// `agentctl pool fill` in the background to make up what was taken.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "provider/common/failed_create.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "provider/incus/lifecycle/provider_impl.hpp"
#include "provider/incus/network/host_user.hpp"

extern char** environ;

namespace agentctl::provider::incus {
namespace {

// What an entry is made with besides the defaults; a change here makes
// entries of an earlier agentctl unfit (their digest differs).
constexpr std::string_view k_template_format = "pool-1";
constexpr std::uintmax_t k_fill_log_limit = 1 << 20;

std::string new_entry_name() {
    std::random_device random;
    return fmt::format("{}{:08x}", k_pool_prefix, random());
}

}  // namespace

std::optional<std::string> pool_template_digest(const SandboxSpec& spec, const std::string& image) {
    // Only what an entry cannot change once it runs is in the digest; the
    // network policy, the profiles' names and the widenings follow it are
    // applied or recorded when it is taken.
    if (!spec.mounts.empty() || !spec.ports.empty() || !spec.packages.empty() || !spec.agent.empty() ||
        !spec.secrets.empty() || !spec.target.empty() || spec.isolation != Isolation::Container ||
        !spec.network.enabled) {
        return std::nullopt;
    }
    const auto processes = spec.resources.processes == 0 ? k_default_processes : spec.resources.processes;
    const auto canonical =
        fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}", k_template_format, image, spec.user, spec.resources.cpu_cores,
                    spec.resources.memory_bytes, spec.resources.disk_bytes, processes);
    return fmt::format("{:016x}", fnv1a64(canonical));
}

unsigned IncusProvider::pool_size() {
    return static_cast<unsigned>(setting_amount(m_context, config_key::k_pool_size));
}

bool IncusProvider::pool_usable() const { return !m_api.preview() && server_is_this_machine(); }

void IncusProvider::refuse_pool_elsewhere() const {
    if (pool_usable()) return;
    if (m_api.preview()) throw Error("the warm pool has nothing to preview", "run it without --preview");
    throw Error(fmt::format("the warm pool needs an Incus server on this machine (its entries' egress proxies and "
                            "firewall tables are this machine's), and the {} is not",
                            m_server.describe()),
                "use the pool with the local Incus server");
}

std::vector<PoolEntry> IncusProvider::pool_entries() {
    std::vector<PoolEntry> entries;
    for (const auto& instance : m_api.instances_where(key::k_role, key::k_role_pool)) {
        const auto marks = read_instance_marks(instance);
        if (!marks.is_pool_entry()) continue;
        entries.push_back(PoolEntry{instance.name, instance.status, entry_ready(instance)});
    }
    return entries;
}

bool IncusProvider::entry_ready(const Instance& instance) {
    const auto marks = read_instance_marks(instance);
    return marks.is_pool_entry() && !marks.unfinished() && instance.running();
}

unsigned IncusProvider::pool_fill(const SandboxSpec& like) {
    refuse_pool_elsewhere();
    SandboxSpec spec = like;
    spec.image = image_for(like);
    spec.network = policy::NetworkPolicy{};  // allows nothing
    const auto digest = pool_template_digest(spec, spec.image);
    if (!digest) {
        throw Error(
            "the warm pool holds only containers without mounts, ports, packages, an agent, secrets or a "
            "cluster target",
            "agentctl pool fill makes entries like `agentctl create NAME --isolation container --mount-none`");
    }
    const auto size = pool_size();
    const core::FileLock fill(host_pool_lock_path(m_context.host_lock_dir, m_project), [&] {
        m_context.reporter.notice("waiting for another agentctl that fills or drains the pool");
    });
    unsigned ready = 0;
    for (const auto& instance : m_api.instances_where(key::k_role, key::k_role_pool)) {
        if (!read_instance_marks(instance).is_pool_entry()) continue;
        // Made otherwise (another image or agentctl), half made by a fill
        // that was killed, or stopped by a reboot: made again. One beyond
        // the size goes too.
        if (entry_ready(instance) && instance.config_value(key::k_pool_template) == *digest && ready < size) {
            ++ready;
            continue;
        }
        remove_entry(instance.name);
    }
    unsigned made = 0;
    for (; ready + made < size; ++made) {
        spec.name = new_entry_name();
        m_context.reporter.step(fmt::format("making pool entry {} ({} of {})", spec.name, ready + made + 1, size));
        const auto lock = lock_sandbox(spec.name);
        make_sandbox(spec, {{std::string(key::k_role), std::string(key::k_role_pool)},
                            {std::string(key::k_pool_template), *digest}});
    }
    return made;
}

unsigned IncusProvider::pool_drain() {
    refuse_pool_elsewhere();
    const core::FileLock fill(host_pool_lock_path(m_context.host_lock_dir, m_project), [&] {
        m_context.reporter.notice("waiting for another agentctl that fills or drains the pool");
    });
    unsigned removed = 0;
    for (const auto& instance : m_api.instances_where(key::k_role, key::k_role_pool)) {
        if (read_instance_marks(instance).is_pool_entry()) removed += remove_entry(instance.name) ? 1 : 0;
    }
    return removed;
}

bool IncusProvider::remove_entry(const std::string& entry) {
    // Under the entry's lock: a create taking it holds that lock until the
    // entry is its sandbox, and then the entry is no longer one.
    const auto lock = lock_sandbox(entry);
    const auto instance = m_api.instance(entry);
    if (!instance || !read_instance_marks(*instance).is_pool_entry()) return false;
    m_context.reporter.step(fmt::format("removing pool entry {}", entry));
    remove_pieces(entry);
    return true;
}

bool IncusProvider::take_from_pool(const SandboxSpec& spec) {
    if (!pool_usable() || pool_size() == 0) return false;
    const auto image = spec.image.empty() ? setting(m_context, config_key::k_image) : spec.image;
    const auto digest = pool_template_digest(spec, image);
    if (!digest) return false;
    for (const auto& listed : m_api.instances_where(key::k_role, key::k_role_pool)) {
        if (!entry_ready(listed) || listed.config_value(key::k_pool_template) != *digest) continue;
        // Another create taking it, or a fill or drain removing it, holds it.
        const auto lock = core::FileLock::try_acquire(host_sandbox_lock_path(m_context.host_lock_dir, listed.name));
        if (!lock) continue;
        const auto entry = m_api.instance(listed.name);
        if (!entry || !entry_ready(*entry)) continue;
        const auto& name = entry->name;
        m_context.reporter.step(fmt::format("taking {} from the warm pool for {}", name, spec.name));
        // From here it is the sandbox, unfinished until its policy is proved:
        // a create killed now leaves what the next create of the name (or
        // gc) removes.
        set_records(name, {{std::string(key::k_role), ""},
                           {std::string(key::k_pool_template), ""},
                           {std::string(key::k_name), spec.name},
                           {std::string(key::k_create_pending), "true"},
                           {std::string(key::k_profiles), profiles_record(spec.profiles)}});
        try {
            apply_policy(name, spec.network, {{std::string(key::k_create_pending), ""}});
        } catch (...) {
            m_context.reporter.fail_step();
            common::undo_failed_create(
                m_context.reporter, spec.name, spec.keep_on_failure, [&] { remove_pieces(name); },
                "agentctl delete " + spec.name);
            throw;
        }
        return true;
    }
    return false;
}

void IncusProvider::refill_in_background() {
    if (!pool_usable() || m_context.self_exe.empty()) return;
    std::vector<std::string> argv{m_context.self_exe, "--provider", "incus"};
    if (!m_server.remote.empty()) argv.insert(argv.end(), {"--remote", m_server.remote});
    if (!m_project.empty()) argv.insert(argv.end(), {"--project", m_project});
    argv.insert(argv.end(), {"pool", "fill"});
    // Beside the sandboxes' state directories (no sandbox name has a dot).
    const std::filesystem::path log = default_state_dir(m_context, "pool-fill.log");
    std::error_code ec;
    std::filesystem::create_directories(log.parent_path(), ec);
    // Fills append to it; it is started over once it holds many of them.
    if (std::filesystem::file_size(log, ec) > k_fill_log_limit && !ec) std::filesystem::resize_file(log, 0, ec);
    m_context.reporter.step(fmt::format("refilling the warm pool in the background (log: {})", log.string()));
    std::vector<char*> args;
    for (auto& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    // Detached (its own session, its parent gone at once): it outlives this
    // command, holds none of its descriptors or locks, and runs at a lower
    // priority than the commands a person waits for.
    const pid_t first = ::fork();
    if (first < 0) return;
    if (first == 0) {
        ::setsid();
        if (::fork() != 0) ::_exit(0);
        const int null_fd = ::open("/dev/null", O_RDONLY);
        const int out_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
        if (out_fd >= 0) {
            ::dup2(out_fd, STDOUT_FILENO);
            ::dup2(out_fd, STDERR_FILENO);
        }
        ::close_range(3, ~0U, 0);
        ::setpriority(PRIO_PROCESS, 0, 10);
        ::execve(args[0], args.data(), environ);
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(first, &status, 0) < 0 && errno == EINTR) {
    }
}

void IncusProvider::refuse_pool_entry(const Instance& instance) {
    if (!read_instance_marks(instance).is_pool_entry()) return;
    throw Error(fmt::format("{} is an entry of the warm pool, not a sandbox", instance.name),
                "a create takes an entry when it can (agentctl pool shows them)");
}

std::optional<Instance> IncusProvider::taken_as(const std::string& name) {
    if (m_api.preview()) return std::nullopt;
    auto taken = m_api.instances_where(key::k_name, name);
    if (taken.empty()) return std::nullopt;
    return std::move(taken.front());
}

IncusProvider::FoundSandbox IncusProvider::find_sandbox(const std::string& name) {
    FoundSandbox found{name, m_api.instance(name)};
    if (found.instance) {
        refuse_pool_entry(*found.instance);
    } else if ((found.instance = taken_as(name))) {
        found.name = found.instance->name;
    }
    return found;
}

std::string IncusProvider::instance_of(const std::string& name) {
    return m_api.preview() ? name : find_sandbox(name).name;
}

}  // namespace agentctl::provider::incus
