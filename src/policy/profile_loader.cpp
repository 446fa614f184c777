// Loading `kind: Profile` and `kind: Spec` documents: strict, every problem
// collected, nothing returned unless the whole document is valid.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "policy/addresses.hpp"
#include "policy/allow_text.hpp"
#include "policy/catalog.hpp"
#include "policy/paths.hpp"
#include "policy/profile.hpp"
#include "policy/yaml_decoder.hpp"

namespace agentctl::policy {
namespace {

constexpr std::string_view k_api_version = "agentctl.dev/v1";
constexpr std::int64_t k_max_cpu_cores = 1024;
constexpr std::size_t k_max_allow_file_bytes = 1024 * 1024;

// The real allow-file reader: regular files only (never a device or a FIFO
// that would block), at most 1 MiB.
std::optional<std::string> read_allow_file(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) return std::nullopt;
    if (!S_ISREG(info.st_mode)) throw Error(fmt::format("{} is not a regular file", path));
    if (static_cast<std::size_t>(info.st_size) > k_max_allow_file_bytes) {
        throw Error(fmt::format("{} is larger than {} bytes", path, k_max_allow_file_bytes));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("cannot read {}", path));
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::string directory_of(const std::string& label) {
    auto slash = label.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : label.substr(0, slash);
}

std::string stem_of(const std::string& label) {
    auto name = label.substr(label.rfind('/') == std::string::npos ? 0 : label.rfind('/') + 1);
    if (name.starts_with("built-in:")) name = name.substr(9);
    auto dot = name.rfind('.');
    return dot == std::string::npos ? name : name.substr(0, dot);
}

class Loader {
public:
    // `origin_prefix` starts every origin: "profile strict" or "spec ./x.yaml".
    Loader(YamlDecoder& decoder, const LoadContext& context, std::string origin_prefix)
        : m_d(decoder), m_context(context), m_origin_prefix(std::move(origin_prefix)) {}

    ProfileSpec spec(const YAML::Node& node, const std::string& field) {
        ProfileSpec out;
        if (!m_d.expect_map(
                node, field,
                {"network", "resources", "mounts", "mountPolicy", "console", "packages", "isolation", "secrets"}))
            return out;
        if (auto n = node["secrets"]) secrets(n, field + ".secrets", out);
        if (auto n = node["network"]) network(n, field + ".network", out);
        if (auto n = node["resources"]) resources(n, field + ".resources", out.resources);
        if (auto n = node["mounts"]) mounts(n, field + ".mounts", out.mounts);
        if (auto n = node["mountPolicy"]) mount_policy(n, field + ".mountPolicy", out.mount_policy);
        if (auto n = node["console"]) {
            if (m_d.expect_map(n, field + ".console", {"viewer"}) && n["viewer"]) {
                if (auto viewer = m_d.string(n["viewer"], field + ".console.viewer")) {
                    if (*viewer == "spice" || *viewer == "vnc" || *viewer == "native") {
                        out.viewer = *viewer;
                    } else {
                        m_d.error(n["viewer"], field + ".console.viewer",
                                  fmt::format("must be spice, vnc or native, got \"{}\"", *viewer));
                    }
                }
            }
        }
        if (auto n = node["packages"]) {
            if (m_d.expect_sequence(n, field + ".packages")) {
                for (std::size_t i = 0; i < n.size(); ++i) {
                    auto item_field = fmt::format("{}.packages[{}]", field, i);
                    auto name = m_d.string(n[i], item_field);
                    if (!name) continue;
                    if (!is_valid_package_name(*name)) {
                        m_d.error(n[i], item_field,
                                  fmt::format("\"{}\" is not a package name ([A-Za-z0-9][A-Za-z0-9._+-]*)", *name));
                    } else if (std::find(out.packages.begin(), out.packages.end(), *name) == out.packages.end()) {
                        out.packages.push_back(*name);
                    }
                }
            }
        }
        if (auto n = node["isolation"]) {
            if (auto value = m_d.string(n, field + ".isolation")) {
                if (*value == "vm" || *value == "container") {
                    out.isolation = *value == "vm" ? Isolation::Vm : Isolation::Container;
                    out.isolation_origin = origin(n);
                } else {
                    m_d.error(n, field + ".isolation", fmt::format("must be vm or container, got \"{}\"", *value));
                }
            }
        }
        return out;
    }

private:
    std::string origin(const YAML::Node& node) const {
        return fmt::format("{} ({}:{})", m_origin_prefix, m_d.label(), YamlDecoder::line_of(node));
    }

    std::optional<std::uint16_t> port(const YAML::Node& node, const std::string& field) {
        auto value = m_d.integer(node, field, 1, 65535);
        if (!value) return std::nullopt;
        return static_cast<std::uint16_t>(*value);
    }

    std::optional<std::string> absolute_path(const YAML::Node& node, const std::string& field) {
        auto text = m_d.string(node, field);
        if (!text) return std::nullopt;
        auto expanded = expand_tilde(*text, m_context.home);
        if (!expanded) {
            m_d.error(node, field, fmt::format("\"{}\": only ~ and ~/ are expanded, not ~user", *text));
            return std::nullopt;
        }
        if (!expanded->starts_with("/")) {
            m_d.error(node, field, fmt::format("must be an absolute path (or start with ~/), got \"{}\"", *text));
            return std::nullopt;
        }
        return clean_path(*expanded, "/");
    }

    void network(const YAML::Node& node, const std::string& field, ProfileSpec& out) {
        if (!m_d.expect_map(
                node, field,
                {"denyLAN", "allow", "allowPresets", "allowFile", "ports", "dns", "budgets", "defaultBudget"}))
            return;
        if (auto n = node["denyLAN"]) out.deny_lan = m_d.boolean(n, field + ".denyLAN");
        if (auto n = node["allow"]; n && m_d.expect_sequence(n, field + ".allow")) {
            for (std::size_t i = 0; i < n.size(); ++i)
                allow_item(n[i], fmt::format("{}.allow[{}]", field, i), out.allow);
        }
        if (auto n = node["allowPresets"]; n && m_d.expect_sequence(n, field + ".allowPresets")) {
            for (std::size_t i = 0; i < n.size(); ++i) {
                auto item_field = fmt::format("{}.allowPresets[{}]", field, i);
                auto name = m_d.string(n[i], item_field);
                if (!name) continue;
                if (find_preset(*name) == nullptr) {
                    std::string known;
                    for (const auto& preset : presets())
                        known += (known.empty() ? "" : ", ") + std::string(preset.name);
                    m_d.error(n[i], item_field, fmt::format("unknown preset \"{}\" (known: {})", *name, known));
                } else if (std::find(out.allow_presets.begin(), out.allow_presets.end(), *name) ==
                           out.allow_presets.end()) {
                    out.allow_presets.push_back(*name);
                }
            }
        }
        if (auto n = node["allowFile"]) allow_file(n, field + ".allowFile", out);
        if (auto n = node["ports"]; n && m_d.expect_sequence(n, field + ".ports")) {
            for (std::size_t i = 0; i < n.size(); ++i)
                port_item(n[i], fmt::format("{}.ports[{}]", field, i), out.ports);
        }
        if (auto n = node["dns"]; n && m_d.expect_map(n, field + ".dns", {"servers", "disabled"})) {
            if (auto servers = n["servers"]; servers && m_d.expect_sequence(servers, field + ".dns.servers")) {
                std::vector<std::string> list;
                bool good = true;
                for (std::size_t i = 0; i < servers.size(); ++i) {
                    auto item_field = fmt::format("{}.dns.servers[{}]", field, i);
                    auto text = m_d.string(servers[i], item_field);
                    auto ip = text ? parse_ip_literal(*text) : std::nullopt;
                    if (!ip) {
                        if (text) m_d.error(servers[i], item_field, fmt::format("\"{}\" is not an IP address", *text));
                        good = false;
                        continue;
                    }
                    list.push_back(ip->to_string());
                }
                if (good) out.dns.servers = list;
            }
            if (auto disabled = n["disabled"]) out.dns.disabled = m_d.boolean(disabled, field + ".dns.disabled");
        }
        budgets(node, field, out);
    }

    // network.budgets: ["HOST:PORT=SIZE", ...]; network.defaultBudget: SIZE.
    void budgets(const YAML::Node& node, const std::string& field, ProfileSpec& out) {
        if (auto n = node["budgets"]; n && m_d.expect_sequence(n, field + ".budgets")) {
            for (std::size_t i = 0; i < n.size(); ++i) {
                const auto item_field = fmt::format("{}.budgets[{}]", field, i);
                auto text = m_d.string(n[i], item_field);
                if (!text) continue;
                try {
                    tighten_budgets(out.budgets, {parse_budget_limit(*text)});
                } catch (const Error& error) {
                    m_d.error(n[i], item_field, error.what());
                }
            }
        }
        if (auto n = node["defaultBudget"]) {
            auto text = m_d.string(n, field + ".defaultBudget");
            if (!text) return;
            if (auto problem = size_problem(*text, false); !problem.empty()) {
                m_d.error(n, field + ".defaultBudget", fmt::format("\"{}\" is not {}", *text, problem));
            } else {
                out.default_budget = *parse_size(*text);
            }
        }
    }

    void allow_item(const YAML::Node& node, const std::string& field, std::vector<AllowRule>& rules) {
        if (!m_d.expect_map(node, field, {"domain", "ports"})) return;
        auto domain_node = node["domain"];
        if (!domain_node) {
            m_d.error(node, field + ".domain", "is required");
            return;
        }
        auto domain = m_d.string(domain_node, field + ".domain");
        std::vector<std::uint16_t> ports;
        bool ports_given = false;
        bool ports_good = true;
        if (auto n = node["ports"]; n && m_d.expect_sequence(n, field + ".ports")) {
            ports_given = true;
            for (std::size_t i = 0; i < n.size(); ++i) {
                auto value = port(n[i], fmt::format("{}.ports[{}]", field, i));
                if (value) {
                    ports.push_back(*value);
                } else {
                    ports_good = false;
                }
            }
        }
        if (!domain) return;
        AllowRule rule;
        try {
            rule = parse_allow_entry(*domain, origin(domain_node));
        } catch (const Error& error) {
            m_d.error(domain_node, field + ".domain", error.what());
            return;
        }
        if (ports_given && !rule.ports.empty()) {
            m_d.error(domain_node, field + ".domain", "names ports itself and in ports: give them in one place");
            return;
        }
        if (!ports_good) return;
        if (ports_given) {
            std::sort(ports.begin(), ports.end());
            ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
            rule.ports = ports;
        }
        rules.push_back(std::move(rule));
    }

    void allow_file(const YAML::Node& node, const std::string& field, ProfileSpec& out) {
        auto text = m_d.string(node, field);
        if (!text) return;
        auto expanded = expand_tilde(*text, m_context.home);
        if (!expanded || expanded->empty()) {
            m_d.error(node, field, fmt::format("\"{}\" is not a usable path", *text));
            return;
        }
        // Relative to the profile's own directory.
        std::string base = directory_of(m_d.label());
        std::string path = base.starts_with("/")        ? clean_path(*expanded, base)
                           : expanded->starts_with("/") ? clean_path(*expanded, "/")
                                                        : base + "/" + *expanded;
        try {
            auto reader = m_context.read_file != nullptr ? m_context.read_file : &read_allow_file;
            auto content = reader(path);
            if (!content) {
                m_d.error(node, field, fmt::format("allow file {} does not exist", path));
                return;
            }
            auto rules = parse_allow_text(*content, path);
            out.allow.insert(out.allow.end(), rules.begin(), rules.end());
            out.allow_files.push_back(path);
        } catch (const Error& error) {
            m_d.error(node, field, error.what());
        }
    }

    void port_item(const YAML::Node& node, const std::string& field, std::vector<PortForward>& ports) {
        if (!m_d.expect_map(node, field, {"host", "guest", "protocol"})) return;
        PortForward forward;
        bool good = true;
        for (const char* key : {"host", "guest"}) {
            auto n = node[key];
            if (!n) {
                m_d.error(node, field + "." + key, "is required");
                good = false;
                continue;
            }
            auto value = port(n, field + "." + key);
            if (!value) {
                good = false;
            } else {
                (std::string_view(key) == "host" ? forward.host_port : forward.guest_port) = *value;
            }
        }
        if (auto n = node["protocol"]) {
            auto value = m_d.string(n, field + ".protocol");
            if (value && (*value == "tcp" || *value == "udp")) {
                forward.protocol = *value;
            } else {
                if (value) m_d.error(n, field + ".protocol", fmt::format("must be tcp or udp, got \"{}\"", *value));
                good = false;
            }
        }
        if (!good) return;
        for (const auto& other : ports) {
            if (other.host_port == forward.host_port && other.protocol == forward.protocol) {
                m_d.error(node, field,
                          fmt::format("host port {}/{} is already forwarded", forward.host_port, forward.protocol));
                return;
            }
        }
        ports.push_back(forward);
    }

    void resources(const YAML::Node& node, const std::string& field, Resources& out) {
        if (!m_d.expect_map(node, field, {"cpuCores", "memory", "diskSize", "processes"})) return;
        if (auto n = node["cpuCores"]) {
            if (auto value = m_d.integer(n, field + ".cpuCores", 1, k_max_cpu_cores))
                out.cpu_cores = static_cast<int>(*value);
        }
        if (auto n = node["processes"]) {
            if (auto value = m_d.integer(n, field + ".processes", 1, k_max_processes))
                out.processes = static_cast<int>(*value);
        }
        for (const char* key : {"memory", "diskSize"}) {
            auto n = node[key];
            if (!n) continue;
            auto text = m_d.string(n, field + "." + key);
            if (!text) continue;
            const bool memory = std::string_view(key) == "memory";
            if (auto problem = size_problem(*text, memory); !problem.empty()) {
                m_d.error(n, field + "." + key, fmt::format("\"{}\" is not {}", *text, problem));
                continue;
            }
            (memory ? out.memory_bytes : out.disk_bytes) = *parse_size(*text);
        }
    }

    void mounts(const YAML::Node& node, const std::string& field, std::vector<ProfileMount>& out) {
        if (!m_d.expect_sequence(node, field)) return;
        for (std::size_t i = 0; i < node.size(); ++i) {
            auto item = node[i];
            auto item_field = fmt::format("{}[{}]", field, i);
            if (!m_d.expect_map(item, item_field, {"hostPath", "guestPath", "writable"})) continue;
            ProfileMount mount;
            mount.origin = origin(item);
            auto host = item["hostPath"];
            if (!host) {
                m_d.error(item, item_field + ".hostPath", "is required");
                continue;
            }
            auto host_text = m_d.string(host, item_field + ".hostPath");
            if (host_text && host_text->empty()) m_d.error(host, item_field + ".hostPath", "must not be empty");
            if (host_text) mount.host_path = *host_text;
            if (auto guest = item["guestPath"]) {
                auto guest_text = m_d.string(guest, item_field + ".guestPath");
                if (guest_text && !guest_text->starts_with("/")) {
                    m_d.error(guest, item_field + ".guestPath",
                              fmt::format("must be an absolute path, got \"{}\"", *guest_text));
                } else if (guest_text) {
                    mount.guest_path = *guest_text;
                }
            }
            if (auto writable = item["writable"])
                mount.writable = m_d.boolean(writable, item_field + ".writable").value_or(false);
            out.push_back(std::move(mount));
        }
    }

    void mount_policy(const YAML::Node& node, const std::string& field, MountPolicy& out) {
        if (!m_d.expect_map(node, field, {"allowedRoots", "denyPaths", "allowHome", "createMissing"})) return;
        for (const char* key : {"allowedRoots", "denyPaths"}) {
            auto n = node[key];
            if (!n || !m_d.expect_sequence(n, field + "." + key)) continue;
            std::vector<std::string> paths;
            for (std::size_t i = 0; i < n.size(); ++i) {
                if (auto path = absolute_path(n[i], fmt::format("{}.{}[{}]", field, key, i))) paths.push_back(*path);
            }
            if (std::string_view(key) == "allowedRoots") {
                out.allowed_roots = paths;
            } else {
                out.deny_paths = paths;
            }
        }
        if (auto n = node["allowHome"]) out.allow_home = m_d.boolean(n, field + ".allowHome");
        if (auto n = node["createMissing"]) out.create_missing = m_d.boolean(n, field + ".createMissing");
    }

    // secrets: {bind: [{name, env, hosts: [{host, header}]}], forbid: [{secret, host}]}
    void secrets(const YAML::Node& node, const std::string& field, ProfileSpec& out) {
        if (!m_d.expect_map(node, field, {"bind", "forbid"})) return;
        if (auto n = node["bind"]; n && m_d.expect_sequence(n, field + ".bind")) {
            for (std::size_t i = 0; i < n.size(); ++i) secret_binding(n[i], fmt::format("{}.bind[{}]", field, i), out);
        }
        if (auto n = node["forbid"]; n && m_d.expect_sequence(n, field + ".forbid")) {
            for (std::size_t i = 0; i < n.size(); ++i) {
                const auto item_field = fmt::format("{}.forbid[{}]", field, i);
                if (!m_d.expect_map(n[i], item_field, {"secret", "host"})) continue;
                SecretForbid forbid{"", "", origin(n[i]) + " " + item_field};
                if (auto secret = required_string(n[i], item_field, "secret")) {
                    if (*secret == "*" || secret_name_ok(n[i]["secret"], item_field + ".secret", *secret))
                        forbid.secret = *secret;
                }
                if (auto host = required_string(n[i], item_field, "host"))
                    forbid.host = secret_host(n[i]["host"], item_field + ".host", *host);
                if (!forbid.secret.empty() && !forbid.host.empty()) out.secret_forbids.push_back(std::move(forbid));
            }
        }
    }

    void secret_binding(const YAML::Node& node, const std::string& field, ProfileSpec& out) {
        if (!m_d.expect_map(node, field, {"name", "env", "hosts"})) return;
        SecretBinding binding{"", "", {}, origin(node) + " " + field};
        bool good = true;
        if (auto name = required_string(node, field, "name");
            name && secret_name_ok(node["name"], field + ".name", *name)) {
            binding.name = *name;
        } else {
            good = false;
        }
        if (auto n = node["env"]) {
            auto env = m_d.string(n, field + ".env");
            const auto problem = env ? variable_problem(*env) : std::nullopt;
            if (problem) m_d.error(n, field + ".env", *problem);
            good = good && env && !problem;
            if (env) binding.env = *env;
        }
        if (auto n = node["hosts"]; n && m_d.expect_sequence(n, field + ".hosts")) {
            for (std::size_t i = 0; i < n.size(); ++i) {
                const auto host_field = fmt::format("{}.hosts[{}]", field, i);
                if (!m_d.expect_map(n[i], host_field, {"host", "header"})) {
                    good = false;
                    continue;
                }
                SecretHost host{"", "authorization"};
                if (auto text = required_string(n[i], host_field, "host"))
                    host.host = secret_host(n[i]["host"], host_field + ".host", *text);
                if (auto h = n[i]["header"]) {
                    auto header = m_d.string(h, host_field + ".header");
                    if (header && !is_header_name(*header)) {
                        m_d.error(h, host_field + ".header",
                                  fmt::format("\"{}\" is not an HTTP header name (e.g. authorization)", *header));
                        header.reset();
                    }
                    host.header = header ? ascii_lower(*header) : std::string();
                }
                if (host.host.empty() || host.header.empty()) good = false;
                binding.hosts.push_back(std::move(host));
            }
        }
        if (good) out.secrets.push_back(std::move(binding));
    }

    std::optional<std::string> required_string(const YAML::Node& node, const std::string& field, const char* key) {
        auto n = node[key];
        if (!n) {
            m_d.error(node, field + "." + key, "is required");
            return std::nullopt;
        }
        return m_d.string(n, field + "." + key);
    }

    bool secret_name_ok(const YAML::Node& node, const std::string& field, const std::string& name) {
        try {
            check_secret_name(name);
            return true;
        } catch (const Error& error) {
            m_d.error(node, field, fmt::format("{}: {}", error.what(), error.hint()));
            return false;
        }
    }

    // The host lower-cased; empty (and reported) when it cannot carry a secret.
    std::string secret_host(const YAML::Node& node, const std::string& field, const std::string& host) {
        if (is_secret_host(host)) return ascii_lower(host);
        m_d.error(node, field,
                  fmt::format("\"{}\" is not a host name (no port or path: secrets go to port 443)", host));
        return {};
    }

    YamlDecoder& m_d;
    const LoadContext& m_context;
    std::string m_origin_prefix;
};

// apiVersion and kind; returns false when the document cannot be one of `kind`.
bool check_header(const YAML::Node& root, YamlDecoder& d, std::string_view kind) {
    if (!d.expect_map(root, "", {"apiVersion", "kind", "metadata", "spec"})) return false;
    if (auto n = root["apiVersion"]; !n) {
        d.error(root, "apiVersion", fmt::format("is required (apiVersion: {})", k_api_version));
    } else if (auto value = d.string(n, "apiVersion"); value && *value != k_api_version) {
        d.error(n, "apiVersion", fmt::format("must be {}, got \"{}\"", k_api_version, *value));
    }
    if (auto n = root["kind"]; !n) {
        d.error(root, "kind", fmt::format("is required (kind: {})", kind));
    } else if (auto value = d.string(n, "kind"); value && *value != kind) {
        d.error(n, "kind", fmt::format("must be {} here, got \"{}\"", kind, *value));
        return false;
    }
    return true;
}

void metadata(const YAML::Node& root, YamlDecoder& d, std::string& name, std::string& description) {
    auto n = root["metadata"];
    if (!n || !d.expect_map(n, "metadata", {"name", "description"})) return;
    if (auto value = n["name"]) name = d.string(value, "metadata.name").value_or(name);
    if (auto value = n["description"]) description = d.string(value, "metadata.description").value_or("");
}

Profile decode_profile(std::string_view text, const std::string& label, ProfileSource source,
                       const LoadContext& context, YamlDecoder& d) {
    Profile profile;
    profile.source = source;
    profile.path = label;
    profile.name = stem_of(label);
    auto root = parse_yaml_document(text, d);
    if (!root || !check_header(*root, d, "Profile")) return profile;
    metadata(*root, d, profile.name, profile.description);
    Loader loader(d, context, "profile " + profile.name);
    if (auto spec = (*root)["spec"]) profile.spec = loader.spec(spec, "spec");
    return profile;
}

}  // namespace

std::string_view to_string(ProfileSource source) {
    switch (source) {
        case ProfileSource::Project: return "project";
        case ProfileSource::User: return "user";
        case ProfileSource::Organisation: return "organisation";
        case ProfileSource::BuiltIn: return "built-in";
        case ProfileSource::File: return "file";
    }
    return "file";
}

std::vector<Diagnostic> profile_diagnostics(std::string_view text, const std::string& label,
                                            const LoadContext& context) {
    YamlDecoder d(label);
    (void)decode_profile(text, label, ProfileSource::File, context, d);
    return d.diagnostics();
}

Profile parse_profile(std::string_view text, const std::string& label, ProfileSource source,
                      const LoadContext& context) {
    YamlDecoder d(label);
    auto profile = decode_profile(text, label, source, context, d);
    d.throw_if_failed();
    return profile;
}

SpecDocument parse_spec_document(std::string_view text, const std::string& label, const LoadContext& context) {
    YamlDecoder d(label);
    SpecDocument document;
    document.path = label;
    auto root = parse_yaml_document(text, d);
    if (root && check_header(*root, d, "Spec")) {
        std::string name = stem_of(label);
        std::string description;
        metadata(*root, d, name, description);
        auto spec = (*root)["spec"];
        if (!spec) {
            d.error(*root, "spec", "is required");
        } else if (d.expect_map(spec, "spec", {"image", "profiles", "overrides"})) {
            if (auto n = spec["image"]) document.image = d.string(n, "spec.image").value_or("");
            if (auto n = spec["profiles"])
                document.profiles = d.strings(n, "spec.profiles").value_or(std::vector<std::string>{});
            Loader loader(d, context, "spec " + label);
            if (auto n = spec["overrides"]) document.overrides = loader.spec(n, "spec.overrides");
        }
    }
    d.throw_if_failed();
    return document;
}

}  // namespace agentctl::policy
