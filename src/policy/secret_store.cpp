#include "policy/secret_store.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"
#include "core/files.hpp"
#include "core/paths.hpp"
#include "policy/catalog.hpp"

namespace agentctl::policy {
namespace {

namespace fs = std::filesystem;

constexpr std::array<std::pair<SecretSource, std::string_view>, 4> k_sources{{
    {SecretSource::Value, "stdin"},
    {SecretSource::Env, "env"},
    {SecretSource::File, "file"},
    {SecretSource::Command, "command"},
}};

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
}

fs::path secret_file(const fs::path& state_dir, std::string_view name) {
    return secrets_dir(state_dir) / (std::string(name) + ".json");
}

StoredSecret from_json(const nlohmann::json& doc, const fs::path& file) {
    auto fail = [&](const std::string& why) {
        return Error(fmt::format("{}: {}", file.string(), why),
                     "set the secret again: agentctl secret set NAME (or remove the file)");
    };
    if (!doc.is_object() || !doc.contains("name") || !doc["name"].is_string()) throw fail("field `name` is missing");
    StoredSecret secret;
    secret.name = doc["name"].get<std::string>();
    const auto source = doc.value("source", std::string());
    auto known = std::find_if(k_sources.begin(), k_sources.end(), [&](const auto& s) { return s.second == source; });
    if (known == k_sources.end()) throw fail(fmt::format("field `source`: unknown source \"{}\"", source));
    secret.source = known->first;
    secret.value = doc.value("value", std::string());
    secret.from = doc.value("from", std::string());
    if (doc.contains("hosts")) {
        if (!doc["hosts"].is_array()) throw fail("field `hosts` must be a list");
        for (std::size_t i = 0; i < doc["hosts"].size(); ++i) {
            const auto& host = doc["hosts"][i];
            if (!host.is_object() || !host.contains("host") || !host["host"].is_string())
                throw fail(fmt::format("field `hosts[{}].host` is missing", i));
            secret.hosts.push_back({host["host"].get<std::string>(), host.value("header", std::string())});
        }
    }
    if (secret.source == SecretSource::Command ? secret.from.empty() : secret.value.empty())
        throw fail(secret.source == SecretSource::Command ? "field `from` (the command) is missing"
                                                          : "field `value` is missing");
    return secret;
}

}  // namespace

std::string_view to_string(SecretSource source) {
    for (const auto& [kind, name] : k_sources) {
        if (kind == source) return name;
    }
    return "stdin";
}

std::vector<SecretHost> effective_hosts(const StoredSecret& secret) {
    if (!secret.hosts.empty()) return secret.hosts;
    std::vector<SecretHost> hosts;
    if (const auto* credential = find_credential(secret.name)) {
        for (const auto& host : credential->hosts) hosts.push_back({std::string(host.host), std::string(host.header)});
    }
    return hosts;
}

void check_secret_name(std::string_view name) {
    const bool ok = !name.empty() && name.size() <= 64 && name.front() != '.' && name.front() != '-' &&
                    name.front() != '_' && std::all_of(name.begin(), name.end(), is_name_char);
    if (!ok) {
        throw Error(fmt::format("invalid secret name \"{}\"", name),
                    "use a letter or digit followed by letters, digits, '_', '.' or '-' (at most 64), e.g. github");
    }
}

void check_secret_value(std::string_view name, std::string_view value) {
    if (value.empty()) {
        throw Error(fmt::format("secret {}: the value is empty", name),
                    fmt::format("pipe it in (printf %s \"$TOKEN\" | agentctl secret set {}), or use --from-env, "
                                "--from-file or --from-command",
                                name));
    }
    if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) {
        throw Error(
            fmt::format("secret {}: the value holds a line break or NUL, which cannot go into an HTTP header", name),
            "store the token alone, on one line");
    }
}

bool is_header_name(std::string_view header) {
    return !header.empty() && std::all_of(header.begin(), header.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
}

void check_header_name(std::string_view header) {
    if (!is_header_name(header))
        throw Error(fmt::format("--header \"{}\": not an HTTP header name", header), "e.g. --header authorization");
}

bool is_secret_host(std::string_view host) {
    return !host.empty() && host.find_first_of(":/ ") == std::string_view::npos;
}

std::string without_trailing_line_breaks(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
}

fs::path secrets_dir(const fs::path& state_dir) { return state_dir / "secrets"; }

void save_secret(const fs::path& state_dir, const StoredSecret& secret) {
    check_secret_name(secret.name);
    core::ensure_private_dir(secrets_dir(state_dir));
    nlohmann::json doc{{"name", secret.name}, {"source", to_string(secret.source)}};
    if (!secret.value.empty()) doc["value"] = secret.value;
    if (!secret.from.empty()) doc["from"] = secret.from;
    if (!secret.hosts.empty()) {
        doc["hosts"] = nlohmann::json::array();
        for (const auto& host : secret.hosts) doc["hosts"].push_back({{"host", host.host}, {"header", host.header}});
    }
    core::write_file_atomic(secret_file(state_dir, secret.name), doc.dump(2) + "\n", 0600);
}

std::optional<StoredSecret> load_secret(const fs::path& state_dir, std::string_view name) {
    check_secret_name(name);
    const auto file = secret_file(state_dir, name);
    auto text = core::read_file_if_exists(file);
    if (!text) return std::nullopt;
    auto doc = nlohmann::json::parse(*text, nullptr, false);
    if (doc.is_discarded()) {
        throw Error(fmt::format("{}: not valid JSON", file.string()),
                    fmt::format("set the secret again: agentctl secret set {}", name));
    }
    return from_json(doc, file);
}

std::vector<StoredSecret> list_secrets(const fs::path& state_dir) {
    std::vector<StoredSecret> secrets;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(secrets_dir(state_dir), ec)) {
        const auto path = entry.path();
        if (path.extension() != ".json") continue;
        if (auto secret = load_secret(state_dir, path.stem().string())) secrets.push_back(std::move(*secret));
    }
    std::sort(secrets.begin(), secrets.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return secrets;
}

bool remove_secret(const fs::path& state_dir, std::string_view name) {
    check_secret_name(name);
    std::error_code ec;
    return fs::remove(secret_file(state_dir, name), ec);
}

std::string secret_value(const StoredSecret& secret, ProcessRunner& runner) {
    if (secret.source != SecretSource::Command) return secret.value;
    ProcessRequest request;
    request.argv = {"sh", "-c", secret.from};
    request.timeout = std::chrono::seconds(30);
    const auto result = runner.run(request);
    const auto hint =
        fmt::format("run it yourself to see why, or store the value: agentctl secret set {}", secret.name);
    if (!result.ok()) {
        throw Error(fmt::format("secret {}: its command `{}` failed ({})", secret.name, secret.from,
                                result.timed_out ? "no answer within 30 s" : result.ending()),
                    hint);
    }
    const auto value = without_trailing_line_breaks(result.out);
    if (value.empty())
        throw Error(fmt::format("secret {}: its command `{}` printed nothing", secret.name, secret.from), hint);
    check_secret_value(secret.name, value);
    return value;
}

nlohmann::json secrets_to_json(const std::vector<StoredSecret>& secrets) {
    auto list = nlohmann::json::array();
    for (const auto& secret : secrets) {
        nlohmann::json entry{{"name", secret.name}, {"source", to_string(secret.source)}};
        if (!secret.from.empty()) entry["from"] = secret.from;
        entry["hosts"] = nlohmann::json::array();
        for (const auto& host : effective_hosts(secret))
            entry["hosts"].push_back({{"host", host.host}, {"header", host.header}});
        entry["hostsFrom"] = secret.hosts.empty() ? "catalog" : "secret";
        if (const auto* credential = find_credential(secret.name)) entry["env"] = credential->env;
        list.push_back(std::move(entry));
    }
    return list;
}

std::string render_secret_list(const std::vector<StoredSecret>& secrets) {
    if (secrets.empty()) return "no secrets (agentctl secret set NAME stores one)\n";
    std::string out = fmt::format("{:<20} {:<28} {}\n", "NAME", "SOURCE", "INJECTED INTO");
    for (const auto& secret : secrets) {
        std::string source(to_string(secret.source));
        if (!secret.from.empty()) source += " " + secret.from;
        std::string hosts;
        for (const auto& host : effective_hosts(secret))
            hosts += fmt::format("{}{} ({})", hosts.empty() ? "" : ", ", host.host, host.header);
        out += fmt::format("{:<20} {:<28} {}\n", secret.name, source, hosts);
    }
    return out;
}

}  // namespace agentctl::policy
