#include "core/paths.hpp"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <optional>
#include <unistd.h>

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::core {
namespace {

namespace fs = std::filesystem;

// The entries of the old config directory that are state, not configuration.
constexpr std::array<std::string_view, 1> k_state_entries{"lima"};

const char* lookup(const GetEnv& getenv, const char* name) { return getenv ? getenv(name) : std::getenv(name); }

// An XDG variable counts only when it is an absolute path.
std::optional<fs::path> xdg(const GetEnv& getenv, const char* name) {
    const char* value = lookup(getenv, name);
    if (value == nullptr || *value != '/') return std::nullopt;
    return fs::path(value);
}

fs::path home(const GetEnv& getenv) {
    const char* value = lookup(getenv, "HOME");
    if (value == nullptr || *value != '/') {
        throw Error("$HOME is not set to an absolute path", "set HOME to your home directory");
    }
    return fs::path(value);
}

}  // namespace

fs::path config_dir(const GetEnv& getenv) {
    return xdg(getenv, "XDG_CONFIG_HOME").value_or(home(getenv) / ".config") / "agentctl";
}

fs::path state_dir(const GetEnv& getenv) {
    return xdg(getenv, "XDG_STATE_HOME").value_or(home(getenv) / ".local" / "state") / "agentctl";
}

fs::path runtime_dir(const GetEnv& getenv) {
    if (auto runtime = xdg(getenv, "XDG_RUNTIME_DIR")) return *runtime / "agentctl";
    return state_dir(getenv) / "run";
}

const fs::path& ensure_private_dir(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error(fmt::format("cannot create directory {}: {}", dir.string(), ec.message()));
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) {
        throw Error(fmt::format("cannot inspect {}: {}", dir.string(), std::strerror(errno)));
    }
    if (!S_ISDIR(st.st_mode)) throw Error(fmt::format("{} is not a directory", dir.string()), "remove it and retry");
    if (st.st_uid != ::geteuid()) {
        throw Error(fmt::format("{} belongs to another user (uid {})", dir.string(), st.st_uid),
                    "agentctl keeps its state only in directories you own; remove it or set XDG_STATE_HOME");
    }
    if ((st.st_mode & 0777) != 0700 && ::chmod(dir.c_str(), 0700) != 0) {
        throw Error(fmt::format("cannot make {} private: {}", dir.string(), std::strerror(errno)));
    }
    return dir;
}

std::vector<std::string> migrate_state(const fs::path& old_config_dir, const fs::path& new_state_dir) {
    std::vector<std::string> moved;
    if (old_config_dir == new_state_dir) return moved;
    for (auto entry : k_state_entries) {
        const auto from = old_config_dir / entry;
        const auto to = new_state_dir / entry;
        std::error_code ec;
        if (!fs::is_directory(fs::symlink_status(from, ec))) continue;
        if (fs::exists(fs::symlink_status(to, ec))) continue;  // already there: leave the old copy alone
        ensure_private_dir(new_state_dir);
        if (::rename(from.c_str(), to.c_str()) == 0) {
            moved.emplace_back(entry);
            continue;
        }
        if (errno == ENOENT) continue;  // another agentctl moved it a moment ago
        if (errno != EXDEV) {
            throw Error(fmt::format("cannot move {} to {}: {}", from.string(), to.string(), std::strerror(errno)),
                        "move it yourself, then re-run");
        }
        // Another file system: copy beside the target, then one rename makes it appear whole.
        const auto staging = new_state_dir / fmt::format(".{}.migrating-{}", entry, ::getpid());
        fs::remove_all(staging, ec);
        fs::copy(from, staging, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
        if (ec) {
            fs::remove_all(staging, ec);
            throw Error(fmt::format("cannot copy {} to {}", from.string(), new_state_dir.string()),
                        "move it yourself, then re-run");
        }
        if (::rename(staging.c_str(), to.c_str()) != 0) {
            fs::remove_all(staging, ec);
            if (fs::exists(to)) continue;  // another agentctl won the race
            throw Error(fmt::format("cannot move {} into place: {}", to.string(), std::strerror(errno)));
        }
        fs::remove_all(from, ec);
        moved.emplace_back(entry);
    }
    return moved;
}

}  // namespace agentctl::core
