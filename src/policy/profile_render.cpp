// Profiles, presets and the package catalog as data (JSON), YAML and tables.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "policy/catalog.hpp"
#include "policy/profile_store.hpp"

namespace agentctl::policy {
namespace {

using nlohmann::json;

json rule_json(const AllowRule& rule) { return {{"entry", rule.entry()}, {"origin", rule.origin}}; }

void emit(YAML::Emitter& out, const json& value) {
    switch (value.type()) {
        case json::value_t::object:
            out << YAML::BeginMap;
            for (const auto& [key, item] : value.items()) {
                out << YAML::Key << key << YAML::Value;
                emit(out, item);
            }
            out << YAML::EndMap;
            break;
        case json::value_t::array:
            out << YAML::BeginSeq;
            for (const auto& item : value) emit(out, item);
            out << YAML::EndSeq;
            break;
        case json::value_t::string: {
            const auto& text = value.get_ref<const std::string&>();
            // Quote what YAML would read back as something other than this string.
            bool plain = !text.empty() && text != "true" && text != "false" && text != "null" && text != "~" &&
                         text.find_first_of("*&!|>'\"%@`#{}[],:") == std::string::npos &&
                         !std::isdigit(static_cast<unsigned char>(text.front())) && text.front() != '-' &&
                         text.front() != ' ' && text.back() != ' ';
            if (!plain) out << YAML::DoubleQuoted;
            out << text;
            break;
        }
        case json::value_t::boolean: out << (value.get<bool>() ? "true" : "false"); break;
        case json::value_t::number_integer: out << value.get<std::int64_t>(); break;
        case json::value_t::number_unsigned: out << value.get<std::uint64_t>(); break;
        case json::value_t::number_float: out << value.get<double>(); break;
        default: out << YAML::Null; break;
    }
}

std::string pad(std::string text, std::size_t width) {
    if (text.size() < width) text.append(width - text.size(), ' ');
    return text;
}

}  // namespace

nlohmann::json profile_to_json(const Profile& profile) {
    const auto& spec = profile.spec;
    json allow = json::array();
    for (const auto& rule : spec.allow) allow.push_back(rule_json(rule));
    json preset_rules = json::array();
    for (const auto& name : spec.allow_presets) {
        for (const auto& rule : expand_preset(name)) preset_rules.push_back(rule_json(rule));
    }
    json ports = json::array();
    for (const auto& port : spec.ports) {
        ports.push_back({{"host", port.host_port}, {"guest", port.guest_port}, {"protocol", port.protocol}});
    }
    json mounts = json::array();
    for (const auto& mount : spec.mounts) {
        mounts.push_back({{"hostPath", mount.host_path},
                          {"guestPath", mount.guest_path.empty() ? mount.host_path : mount.guest_path},
                          {"writable", mount.writable},
                          {"origin", mount.origin}});
    }
    json mount_policy = {
        {"allowedRoots", spec.mount_policy.allowed_roots ? json(*spec.mount_policy.allowed_roots) : json(nullptr)},
        {"denyPaths", spec.mount_policy.deny_paths},
        {"allowHome", spec.mount_policy.allow_home.value_or(false)},
        {"createMissing", spec.mount_policy.create_missing.value_or(false)},
    };
    return {
        {"name", profile.name},
        {"source", std::string(to_string(profile.source))},
        {"path", profile.path},
        {"description", profile.description},
        {"spec",
         {{"network",
           {{"denyLAN", spec.deny_lan.value_or(true)},
            {"allow", allow},
            {"allowPresets", spec.allow_presets},
            {"presetRules", preset_rules},
            {"allowFiles", spec.allow_files},
            {"ports", ports},
            {"dns",
             {{"servers", spec.dns.servers ? json(*spec.dns.servers) : json(nullptr)},
              {"disabled", spec.dns.disabled.value_or(false)}}}}},
          {"resources",
           {{"cpuCores", spec.resources.cpu_cores},
            {"memory", spec.resources.memory_bytes},
            {"diskSize", spec.resources.disk_bytes},
            {"processes", spec.resources.processes}}},
          {"mounts", mounts},
          {"mountPolicy", mount_policy},
          {"console", {{"viewer", spec.viewer}}},
          {"packages", spec.packages},
          {"isolation", spec.isolation == Isolation::Container ? "container" : "vm"},
          {"isolationOrigin", spec.isolation_origin}}},
    };
}

std::string profile_to_yaml(const Profile& profile) {
    YAML::Emitter out;
    emit(out, profile_to_json(profile));
    return std::string(out.c_str()) + "\n";
}

std::string render_presets_table() {
    std::string text;
    for (const auto& preset : presets()) {
        text += fmt::format("{}: {}\n", preset.name, preset.description);
        for (const auto& rule : expand_preset(preset.name)) text += fmt::format("  {}\n", rule.entry());
    }
    return text;
}

nlohmann::json presets_to_json() {
    json out = json::array();
    for (const auto& preset : presets()) {
        json entries = json::array();
        for (const auto& rule : expand_preset(preset.name)) entries.push_back(rule.entry());
        out.push_back({{"name", preset.name}, {"description", preset.description}, {"entries", entries}});
    }
    return out;
}

std::string render_packages_table() {
    std::size_t widths[3] = {4, 3, 3};
    for (const auto& entry : package_catalog()) {
        widths[0] = std::max(widths[0], entry.name.size());
        widths[1] = std::max(widths[1], entry.apt.size());
        widths[2] = std::max(widths[2], entry.dnf.size());
    }
    std::string text =
        fmt::format("{}  {}  {}  APK\n", pad("NAME", widths[0]), pad("APT", widths[1]), pad("DNF", widths[2]));
    for (const auto& entry : package_catalog()) {
        text += fmt::format("{}  {}  {}  {}\n", pad(std::string(entry.name), widths[0]),
                            pad(std::string(entry.apt), widths[1]), pad(std::string(entry.dnf), widths[2]), entry.apk);
    }
    return text;
}

nlohmann::json packages_to_json() {
    json out = json::array();
    for (const auto& entry : package_catalog()) {
        out.push_back({{"name", entry.name},
                       {"apt", package_names_for(entry.name, PackageManager::Apt)},
                       {"dnf", package_names_for(entry.name, PackageManager::Dnf)},
                       {"apk", package_names_for(entry.name, PackageManager::Apk)}});
    }
    return out;
}

std::string render_profile_list(const std::vector<ProfileSummary>& profiles) {
    std::size_t widths[3] = {4, 6, 4};
    for (const auto& p : profiles) {
        widths[0] = std::max(widths[0], p.name.size());
        widths[1] = std::max(widths[1], p.source.size() + (p.shadowed ? 11 : 0));
        widths[2] = std::max(widths[2], p.path.size());
    }
    std::string text = fmt::format("{}  {}  {}  DESCRIPTION\n", pad("NAME", widths[0]), pad("SOURCE", widths[1]),
                                   pad("PATH", widths[2]));
    for (const auto& p : profiles) {
        text += fmt::format("{}  {}  {}  {}\n", pad(p.name, widths[0]),
                            pad(p.shadowed ? p.source + " (shadowed)" : p.source, widths[1]), pad(p.path, widths[2]),
                            p.description);
    }
    return text;
}

nlohmann::json profile_list_to_json(const std::vector<ProfileSummary>& profiles) {
    json out = json::array();
    for (const auto& p : profiles) {
        out.push_back({{"name", p.name},
                       {"source", p.source},
                       {"path", p.path},
                       {"description", p.description},
                       {"shadowed", p.shadowed}});
    }
    return out;
}

}  // namespace agentctl::policy
