// Finding profiles: project, user, organisation, built-in; the organisation's
// profile of a name is the floor under a same-named project or user profile.
#include "policy/profile_store.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "core/files.hpp"
#include "core/paths.hpp"
#include "policy/paths.hpp"
#include "policy/sandbox_spec.hpp"

namespace agentctl::policy {
namespace {

struct Location {
    ProfileSource source;
    std::string dir;  // empty for built-ins
};

std::vector<Location> locations(const Environment& env) {
    return {{ProfileSource::Project, env.project_dir},
            {ProfileSource::User, env.user_dir},
            {ProfileSource::Organisation, env.org_dir},
            {ProfileSource::BuiltIn, ""}};
}

std::optional<std::string> env_var(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

struct Found {
    ProfileSource source;
    std::string path;
    std::string text;
};

std::optional<Found> find_in(const Location& location, const std::string& name) {
    if (location.source == ProfileSource::BuiltIn) {
        auto text = builtin_profile_text(name);
        if (!text) return std::nullopt;
        return Found{location.source, "built-in:" + name, std::string(*text)};
    }
    if (location.dir.empty()) return std::nullopt;
    std::string path = location.dir + "/" + name + ".yaml";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
    auto text = core::read_file_if_exists(path);
    if (!text) return std::nullopt;
    return Found{location.source, path, std::move(*text)};
}

Profile parse_found(const Found& found, const Environment& env) {
    LoadContext context;
    context.home = env.home;
    return parse_profile(found.text, found.path, found.source, context);
}

std::string known_profiles(const Environment& env) {
    std::vector<std::string> names;
    for (const auto& summary : list_profiles(env)) {
        if (std::find(names.begin(), names.end(), summary.name) == names.end()) names.push_back(summary.name);
    }
    std::string text;
    for (const auto& n : names) text += (text.empty() ? "" : ", ") + n;
    return text;
}

}  // namespace

Environment environment_from_process(const std::string& profile_dir_setting, const std::string& default_profile) {
    Environment env;
    auto home = env_var("HOME");
    if (!home || !home->starts_with("/")) {
        throw Error("$HOME is not set to an absolute path",
                    "agentctl needs $HOME to find its configuration and workspaces");
    }
    env.home = clean_path(*home, "/");
    std::error_code ec;
    auto cwd = std::filesystem::current_path(ec);
    if (ec) throw Error("cannot determine the working directory: " + ec.message());
    env.cwd = cwd.string();
    env.project_dir = env.cwd + "/.agentctl/profiles";
    env.config_dir = clean_path(core::config_dir().string(), "/");
    env.state_dir = clean_path(core::state_dir().string(), "/");
    env.runtime_dir = clean_path(core::runtime_dir().string(), "/");
    env.user_dir = env.config_dir + "/profiles";
    if (auto org = env_var("AGENTCTL_ORG_DIR")) {
        env.org_dir = clean_path(*org, env.cwd) + "/profiles";
    } else if (!profile_dir_setting.empty()) {
        auto expanded = expand_tilde(profile_dir_setting, env.home);
        env.org_dir = clean_path(expanded.value_or(profile_dir_setting), env.cwd);
    } else {
        env.org_dir = "/etc/agentctl/profiles";
    }
    if (!default_profile.empty()) env.default_profile = default_profile;
    return env;
}

bool is_valid_profile_name(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
    if (!alnum(name.front())) return false;
    return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

std::vector<ProfileSummary> list_profiles(const Environment& env) {
    std::vector<ProfileSummary> out;
    std::vector<std::string> used;  // names already taken by an earlier location
    for (const auto& location : locations(env)) {
        std::vector<std::string> names;
        if (location.source == ProfileSource::BuiltIn) {
            names = builtin_profile_names();
        } else if (!location.dir.empty()) {
            std::error_code ec;
            for (auto it = std::filesystem::directory_iterator(location.dir, ec);
                 !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
                auto file = it->path().filename().string();
                if (file.size() > 5 && file.ends_with(".yaml") &&
                    is_valid_profile_name(file.substr(0, file.size() - 5))) {
                    names.push_back(file.substr(0, file.size() - 5));
                }
            }
            std::sort(names.begin(), names.end());
        }
        for (const auto& name : names) {
            auto found = find_in(location, name);
            if (!found) continue;
            ProfileSummary summary;
            summary.name = name;
            summary.source = std::string(to_string(location.source));
            summary.path = found->path;
            try {
                summary.description = parse_found(*found, env).description;
            } catch (const Error& error) {
                std::string first(error.what());
                summary.description = "(invalid: " + first.substr(0, first.find('\n')) + ")";
            }
            bool taken = std::find(used.begin(), used.end(), name) != used.end();
            summary.shadowed = taken && location.source != ProfileSource::Organisation;
            used.push_back(name);
            out.push_back(std::move(summary));
        }
    }
    return out;
}

Profile load_profile(const std::string& name, const Environment& env) {
    if (!is_valid_profile_name(name)) {
        throw Error(fmt::format("invalid profile name \"{}\"", name),
                    "a profile name is a letter or digit followed by letters, digits, '.', '_' or '-'");
    }
    std::optional<Found> org;
    std::optional<Found> chosen;
    for (const auto& location : locations(env)) {
        auto found = find_in(location, name);
        if (!found) continue;
        if (location.source == ProfileSource::Organisation) org = found;
        if (!chosen) chosen = found;
    }
    if (!chosen) {
        throw Error(fmt::format("profile \"{}\" not found", name),
                    fmt::format("searched {}, {}, {} and the built-ins; known profiles: {}", env.project_dir,
                                env.user_dir, env.org_dir, known_profiles(env)));
    }
    Profile profile = parse_found(*chosen, env);
    if (org && chosen->source != ProfileSource::Organisation) {
        Profile floor = parse_found(*org, env);
        profile.spec = merge_profile_specs(floor.spec, profile.spec);
        profile.path = fmt::format("{} (over the organisation's {})", chosen->path, org->path);
    }
    return profile;
}

}  // namespace agentctl::policy
