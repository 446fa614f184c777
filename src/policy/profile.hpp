// A profile as loaded from YAML (`kind: Profile`) or a spec file (`kind: Spec`),
// before layering. Optional fields remember whether a layer set them, because
// the layering rules treat "unset" and "set to the default" differently.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"
#include "agentctl/sandbox.hpp"
#include "policy/secret_store.hpp"
#include "policy/units.hpp"

namespace agentctl::policy {

struct ProfileMount {
    std::string host_path;   // as written (~ and {{.Name}} expanded at resolution)
    std::string guest_path;  // empty: same as host path
    bool writable = false;
    std::string origin;  // "profile default (FILE:LINE)"
};

struct MountPolicy {
    // nullopt: no constraint. A list: every mount must be under one of them
    // (absolute, ~ already expanded). An empty list allows no mount at all.
    std::optional<std::vector<std::string>> allowed_roots;
    std::vector<std::string> deny_paths;  // absolute, ~ expanded
    std::optional<bool> allow_home;       // unset = false
    std::optional<bool> create_missing;   // unset = false
};

struct DnsSettings {
    std::optional<std::vector<std::string>> servers;
    std::optional<bool> disabled;
};

// What a profile (or a Spec's overrides) asks for.
struct ProfileSpec {
    std::optional<bool> deny_lan;
    std::vector<AllowRule> allow;            // with origins; allowFile already read in
    std::vector<std::string> allow_presets;  // names, as written
    std::vector<std::string> allow_files;    // absolute paths that were read
    std::vector<PortForward> ports;
    DnsSettings dns;
    // network.budgets and network.defaultBudget: tighten-only, the lowest
    // (per destination, and of the default) wins.
    std::vector<UploadBudget> budgets;
    std::optional<std::uint64_t> default_budget;
    Resources resources;  // 0 = unset
    std::vector<ProfileMount> mounts;
    MountPolicy mount_policy;
    std::string viewer;  // empty = unset
    std::vector<std::string> packages;
    std::optional<Isolation> isolation;
    std::string isolation_origin;              // who asked
    std::vector<SecretBinding> secrets;        // in layer order; a secret or variable twice is refused at create
    std::vector<SecretForbid> secret_forbids;  // every layer's: no later layer or flag lifts one
};

enum class ProfileSource { Project, User, Organisation, BuiltIn, File };
[[nodiscard]] std::string_view to_string(ProfileSource source);  // project|user|organisation|built-in|file

struct Profile {
    std::string name;
    std::string description;
    ProfileSource source = ProfileSource::BuiltIn;
    std::string path;  // file path, or "built-in:NAME"
    ProfileSpec spec;
};

// A `kind: Spec` document (--spec FILE).
struct SpecDocument {
    std::string path;
    std::string image;
    std::vector<std::string> profiles;
    ProfileSpec overrides;
};

// What the loader needs from outside (injected, never read from the process).
struct LoadContext {
    std::string home;  // for ~ in allowFile, allowedRoots, denyPaths
    // Reads an allow file given as an absolute path; nullopt when missing.
    // Defaults to the real filesystem when empty.
    std::optional<std::string> (*read_file)(const std::string& path) = nullptr;
};

// Parses a profile document from text. `label` names it in diagnostics (a path).
// Relative allowFile paths are resolved against the directory of `label`.
// Strict: unknown fields, wrong types, bad sizes and ports are all collected;
// throws agentctl::Error whose message lists every diagnostic (one per line,
// `FILE:LINE:COL: field PATH: MESSAGE`) and nothing is returned.
[[nodiscard]] Profile parse_profile(std::string_view text, const std::string& label, ProfileSource source,
                                    const LoadContext& context);
[[nodiscard]] SpecDocument parse_spec_document(std::string_view text, const std::string& label,
                                               const LoadContext& context);

// The diagnostics themselves, for tests and tools; empty when the text is valid.
[[nodiscard]] std::vector<Diagnostic> profile_diagnostics(std::string_view text, const std::string& label,
                                                          const LoadContext& context);

// `[addr:]host:guest[/tcp|udp]`. Throws agentctl::Error naming the flag value.
[[nodiscard]] PortForward parse_port_flag(std::string_view text);

}  // namespace agentctl::policy
