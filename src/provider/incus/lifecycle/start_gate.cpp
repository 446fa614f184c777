#include "provider/incus/lifecycle/start_gate.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "core/files.hpp"
#include "core/paths.hpp"

namespace agentctl::provider::incus {
namespace {

constexpr std::string_view k_hook_key = "lxc.hook.pre-start = ";
// What tells agentctl's hook line from anyone else's.
constexpr std::string_view k_hook_mark = "agentctl-start-gate";

}  // namespace

std::string start_pass_path(const std::string& runtime_dir, const std::string& project, const std::string& name) {
    return (std::filesystem::path(runtime_dir) / "start-pass" /
            fmt::format("{}_{}", project.empty() ? "default" : project, name))
        .string();
}

std::string start_gate_line(const std::string& pass) {
    // LXC runs a hook through /bin/sh -c; its own arguments come after ours.
    const auto script = fmt::format(
        ": {}; rm -- {} 2>/dev/null || {{ echo 'agentctl: this sandbox starts only with `agentctl start`, "
        "which checks its mounts and network first' >&2; exit 1; }}",
        k_hook_mark, shell_quote(pass));
    return fmt::format("{}/bin/sh -c {}", k_hook_key, shell_quote(script));
}

std::string with_start_gate(std::string_view raw_lxc, const std::string& pass) {
    std::istringstream lines{std::string(raw_lxc)};
    std::string out;
    std::string line;
    while (std::getline(lines, line)) {
        if (line.starts_with(k_hook_key) && line.find(k_hook_mark) != std::string::npos) continue;
        out += line + "\n";
    }
    return out + start_gate_line(pass) + "\n";
}

StartPass::StartPass(std::string path) : m_path(std::move(path)) {
    core::ensure_private_dir(std::filesystem::path(m_path).parent_path());
    core::write_file_atomic(m_path, "", 0600);
}

StartPass::~StartPass() { ::unlink(m_path.c_str()); }

bool StartPass::used() const {
    struct stat st {};
    return ::lstat(m_path.c_str(), &st) != 0 && errno == ENOENT;
}

}  // namespace agentctl::provider::incus
