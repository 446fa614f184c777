// cp: files and directories between this host and a sandbox, as a tar archive
// through `exec` (so every provider with exec has it). Host paths pass the
// rules a mount does; what comes out of a sandbox is checked before it is
// unpacked (plain files, directories and symlinks only, every name below the
// one copied, no setuid or setgid bits) and moved into place only whole.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "cli/commands_list.hpp"
#include "cli/cp_args.hpp"
#include "cli/sandbox_options.hpp"
#include "core/unique_fd.hpp"
#include "policy/sandbox_spec.hpp"

namespace agentctl::cli {
namespace {

namespace fs = std::filesystem;

// Unpacks the archive on stdin at $1 as the sandbox user: into $1 when it is
// a directory, else as $1 itself (its directory must exist). Its one top-level
// entry is $2. A directory copied onto a directory merges into it.
constexpr const char* k_unpack_in_guest = R"SH(set -eu
dest=$1 entry=$2
if [ -d "$dest" ]; then dir=$dest target=${dest%/}/$entry
else
  case $dest in */) echo "$dest: no such directory in the sandbox" >&2; exit 1 ;; esac
  dir=$(dirname -- "$dest") target=$dest
  [ -d "$dir" ] || { echo "$dir: no such directory in the sandbox" >&2; exit 1; }
fi
tmp=$(mktemp -d "$dir/.agentctl-cp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xpf - --no-same-owner
if [ -d "$tmp/$entry" ] && [ -d "$target" ]; then cp -pR "$tmp/$entry/." "$target/"
elif [ -d "$target" ]; then echo "$target is a directory in the sandbox" >&2; exit 1
else mv -f "$tmp/$entry" "$target"; fi
)SH";

// Unpacks a tar stream on stdin into the directory $1.
constexpr const char* k_unpack_stream_in_guest =
    R"SH([ -d "$1" ] || { echo "$1: no such directory in the sandbox" >&2; exit 1; }; exec tar -C "$1" -xpf - --no-same-owner)SH";

// Packs $1 (its directory, then its name) to stdout.
constexpr const char* k_pack_in_guest =
    R"SH(p=${1%/}; [ -n "$p" ] || p=/; [ -e "$p" ] || { echo "$1: no such file or directory in the sandbox" >&2; exit 1; }
cd -- "$(dirname -- "$p")" && exec tar -cf - -- "$(basename -- "$p")")SH";

// Points fd `target` (0 or 1) at `fd` until destroyed.
class Redirect {
public:
    Redirect(int fd, int target) : m_target(target), m_saved(::dup(target)) {
        std::cout.flush();
        std::fflush(stdout);
        if (m_saved < 0 || ::dup2(fd, target) < 0) throw Error("cp: cannot redirect a standard stream");
    }
    ~Redirect() {
        std::fflush(stdout);
        ::dup2(m_saved, m_target);
        ::close(m_saved);
    }
    Redirect(const Redirect&) = delete;
    Redirect& operator=(const Redirect&) = delete;

private:
    int m_target;
    int m_saved;
};

// A private directory, removed with what is left in it.
struct ScratchDir {
    fs::path path;
    explicit ScratchDir(const fs::path& parent) {
        auto pattern = (parent / ".agentctl-cp.XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw Error(
                fmt::format("cp: cannot make a scratch directory in {}: {}", parent.string(), std::strerror(errno)));
        }
        path = pattern;
    }
    ~ScratchDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
};

std::string base_name(std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

ProcessResult run_tar(Session& session, std::vector<std::string> args) {
    ProcessRequest request;
    request.argv = {"tar"};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    return session.runner().run(request);
}

// The archive's members, each a plain file, a directory or a symlink below
// `entry`; throws naming the first that is not.
void check_archive(Session& session, const std::string& archive, const std::string& entry) {
    auto names = run_tar(session, {"-tf", archive, "--quoting-style=escape"});
    auto long_list = run_tar(session, {"-tvf", archive, "--quoting-style=escape"});
    if (!names.ok() || !long_list.ok()) {
        throw Error(fmt::format("cp: what came out of the sandbox is not a tar archive: {}", names.err));
    }
    std::istringstream name_lines(names.out), type_lines(long_list.out);
    std::string name, listing;
    while (std::getline(name_lines, name) && std::getline(type_lines, listing)) {
        const char type = listing.empty() ? '?' : listing.front();
        const auto refuse = [&](std::string_view why) {
            return Error(fmt::format("cp: refused {} from the sandbox: {}; nothing was copied", name, why));
        };
        if (type != '-' && type != 'd' && type != 'l') throw refuse("not a file, directory or symbolic link");
        const auto first = name.substr(0, name.find('/'));
        if (first != entry) throw refuse(fmt::format("not below {}", entry));
        if (name.starts_with("/") || name == ".." || name.find("/../") != std::string::npos || name.ends_with("/.."))
            throw refuse("a path that leaves the copy");
    }
}

// No setuid or setgid bit on anything that came out of a sandbox.
void drop_set_id_bits(const fs::path& root) {
    const auto drop = [](const fs::path& path) {
        struct stat st {};
        if (::lstat(path.c_str(), &st) == 0 && !S_ISLNK(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)) != 0)
            ::chmod(path.c_str(), st.st_mode & 07777 & ~static_cast<mode_t>(S_ISUID | S_ISGID));
    };
    drop(root);
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
        drop(it->path());
}

int exec_in(Session& session, const std::string& name, std::vector<std::string> argv, bool root, bool with_stdin) {
    ExecRequest request;
    request.argv = std::move(argv);
    request.root = root;
    request.forward_stdin = with_stdin;
    return session.commands().exec(name, request);
}

int copy_to_sandbox(Session& session, const CopyRequest& copy, const std::vector<std::string>& profiles) {
    if (copy.host_path == "-") {
        return exec_in(session, copy.sandbox, {"/bin/sh", "-c", k_unpack_stream_in_guest, "sh", copy.guest_path}, false,
                       true);
    }
    const auto host = policy::check_copy_host_path(copy.sandbox, profiles, copy.host_path, policy_environment(session));
    struct stat st {};
    if (::stat(host.c_str(), &st) != 0) {
        throw Error(fmt::format("cp: {}: {}", copy.host_path, std::strerror(errno)));
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        throw Error(fmt::format("cp: {} is not a file or directory", copy.host_path));
    }
    const fs::path resolved(host);
    ScratchDir scratch(fs::temp_directory_path());
    const auto archive = (scratch.path / "archive.tar").string();
    const auto entry = resolved.filename().string();
    auto packed = run_tar(session, {"-C", resolved.parent_path().string(), "-cf", archive, "--", entry});
    if (!packed.ok()) throw Error(fmt::format("cp: cannot pack {}: {}", copy.host_path, packed.err));
    core::UniqueFd in(::open(archive.c_str(), O_RDONLY | O_CLOEXEC));
    Redirect redirect(in.get(), STDIN_FILENO);
    return exec_in(session, copy.sandbox, {"/bin/sh", "-c", k_unpack_in_guest, "sh", copy.guest_path, entry}, false,
                   true);
}

int copy_from_sandbox(Session& session, const CopyRequest& copy, const std::vector<std::string>& profiles) {
    const std::vector<std::string> pack{"/bin/sh", "-c", k_pack_in_guest, "sh", copy.guest_path};
    if (copy.host_path == "-") return exec_in(session, copy.sandbox, pack, true, false);
    const auto env = policy_environment(session);
    auto target = policy::check_copy_host_path(copy.sandbox, profiles, copy.host_path, env);
    const auto entry = base_name(copy.guest_path);
    if (entry == "/" || entry == "." || entry == "..") {
        throw Error(fmt::format("cp: {}:{}: name a file or directory to copy", copy.sandbox, copy.guest_path));
    }
    std::error_code ec;
    if (fs::is_directory(target, ec)) {
        target = policy::check_copy_host_path(copy.sandbox, profiles, (fs::path(target) / entry).string(), env);
    }
    const auto parent = fs::path(target).parent_path();
    if (!fs::is_directory(parent, ec)) {
        throw Error(fmt::format("cp: {}: no such directory on this host", parent.string()));
    }
    if (fs::is_directory(target, ec) && !fs::is_symlink(target, ec)) {
        throw Error(fmt::format("cp: {} already exists on this host", target), "remove it, or copy into another place");
    }
    ScratchDir scratch(parent);
    const auto archive = (scratch.path / "archive.tar").string();
    {
        core::UniqueFd out(::open(archive.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        if (out.get() < 0) throw Error(fmt::format("cp: cannot write {}: {}", archive, std::strerror(errno)));
        Redirect redirect(out.get(), STDOUT_FILENO);
        if (int rc = exec_in(session, copy.sandbox, pack, true, false); rc != 0) return rc;
    }
    check_archive(session, archive, entry);
    const auto unpacked = scratch.path / "x";
    fs::create_directory(unpacked);
    auto result = run_tar(session, {"-C", unpacked.string(), "-xpf", archive, "--no-same-owner"});
    if (!result.ok()) throw Error(fmt::format("cp: cannot unpack what came from the sandbox: {}", result.err));
    drop_set_id_bits(unpacked / entry);
    fs::rename(unpacked / entry, target, ec);
    if (ec) throw Error(fmt::format("cp: cannot put {} in place: {}", target, ec.message()));
    return 0;
}

}  // namespace

void add_cp(CLI::App& app, CommandEnv& env) {
    auto* cmd = app.add_subcommand("cp", "Copy files and directories between a sandbox and this host");
    auto source = std::make_shared<std::string>();
    auto destination = std::make_shared<std::string>();
    cmd->add_option("SRC", *source, "NAME:PATH in a sandbox, or a host path (- for a tar archive on stdin)")
        ->required()
        ->type_name(value_type::k_path);
    cmd->add_option("DEST", *destination, "a host path (- for a tar archive on stdout), or NAME:PATH in a sandbox")
        ->required()
        ->type_name(value_type::k_path);
    cmd->footer(
        "\nA directory is copied whole; into an existing directory, by its name. Modes are kept; in the\n"
        "sandbox the files belong to the sandbox user. Host paths are checked as mounts are (symlinks\n"
        "resolved, credentials and agentctl's own state refused, the profiles' mountPolicy).\n\nExamples:\n"
        "  agentctl cp ./src demo:/workspace\n"
        "  agentctl cp demo:/workspace/report.txt .\n"
        "  tar -cf - notes | agentctl cp - demo:/workspace\n"
        "  agentctl cp demo:/workspace - | tar -tf -");
    cmd->callback([&env, source, destination] {
        env.action = [&env, source, destination] {
            const auto copy = parse_copy_args(*source, *destination);
            env.session.gate("exec");
            const auto profiles = env.session.lifecycle().status(copy.sandbox).profiles;
            if (env.session.globals().preview) {
                // The guest side as it would run; the host side is tar and a rename.
                return exec_in(env.session, copy.sandbox,
                               copy.to_sandbox
                                   ? std::vector<std::string>{"/bin/sh", "-c", k_unpack_in_guest, "sh", copy.guest_path}
                                   : std::vector<std::string>{"/bin/sh", "-c", k_pack_in_guest, "sh", copy.guest_path},
                               !copy.to_sandbox, copy.to_sandbox);
            }
            const int rc = copy.to_sandbox ? copy_to_sandbox(env.session, copy, profiles)
                                           : copy_from_sandbox(env.session, copy, profiles);
            if (rc != 0) {
                throw Error(fmt::format("cp: copying {} {} failed (exit code {})", copy.to_sandbox ? "into" : "out of",
                                        copy.sandbox, rc),
                            "the sandbox's message is above");
            }
            return 0;
        };
    });
}

}  // namespace agentctl::cli
