#include "policy/paths.hpp"

#include <vector>

namespace agentctl::policy {

std::optional<std::string> expand_tilde(std::string_view path, const std::string& home) {
    if (path == "~") return home;
    if (path.starts_with("~/")) return home + std::string(path.substr(1));
    if (path.starts_with("~")) return std::nullopt;
    return std::string(path);
}

std::string clean_path(std::string_view path, const std::string& base) {
    std::string full = path.starts_with("/") ? std::string(path) : base + "/" + std::string(path);
    std::vector<std::string_view> segments;
    std::string_view rest = full;
    while (!rest.empty()) {
        auto slash = rest.find('/');
        auto segment = rest.substr(0, slash);
        rest.remove_prefix(slash == std::string_view::npos ? rest.size() : slash + 1);
        if (segment.empty() || segment == ".") continue;
        if (segment == "..") {
            if (!segments.empty()) segments.pop_back();
            continue;
        }
        segments.push_back(segment);
    }
    std::string out;
    for (auto segment : segments) {
        out += '/';
        out += segment;
    }
    return out.empty() ? "/" : out;
}

bool path_is_under(const std::string& path, const std::string& root) {
    if (root == "/") return true;
    if (path == root) return true;
    return path.size() > root.size() && path.starts_with(root) && path[root.size()] == '/';
}

}  // namespace agentctl::policy
