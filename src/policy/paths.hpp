// Path text helpers shared by the profile loader and mount resolution. Pure:
// nothing here touches the filesystem.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace agentctl::policy {

// "~" and "~/x" -> HOME and HOME/x; other text unchanged. nullopt for "~user".
[[nodiscard]] std::optional<std::string> expand_tilde(std::string_view path, const std::string& home);

// Absolute (relative paths are taken from `base`), `.` and `..` resolved
// lexically, no trailing slash (except "/"), no repeated slashes.
[[nodiscard]] std::string clean_path(std::string_view path, const std::string& base);

// True when `path` is `root` or below it, by whole path segments
// (/home/a/work is not under /home/a/wo). Both must be clean and absolute.
[[nodiscard]] bool path_is_under(const std::string& path, const std::string& root);

}  // namespace agentctl::policy
