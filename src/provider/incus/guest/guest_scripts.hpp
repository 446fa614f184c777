// Shell scripts agentctl runs inside a guest (as root, through the exec API).
// Each is POSIX sh, idempotent, and prints one machine-readable result line
// that the parse_* functions read back.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "provider/incus/client/payloads.hpp"

namespace agentctl::provider::incus {

// The comment (GECOS) of the sandbox user that agentctl's own image has
// already (image_bootstrap.cpp): the bootstrap may move that user to the uid
// the writable mounts need; any other existing user is left as it is.
inline constexpr std::string_view k_image_user_comment = "agentctl sandbox user";

// Creates the non-root user if missing (uid `preferred_uid` when free, else the
// next free one), gives it passwordless sudo through /etc/sudoers.d/, and prints
// `agentctl-user NAME UID GID HOME SHELL`. Works with useradd (Debian, Fedora)
// and busybox adduser (Alpine).
[[nodiscard]] std::string bootstrap_user_script(const std::string& user, int preferred_uid);
[[nodiscard]] std::optional<GuestUser> parse_bootstrap_output(const std::string& output);

// An image's accounts: its /etc/passwd and /etc/group, as text.
struct ImageAccounts {
    std::string passwd;
    std::string group;
};

// The user that bootstrap_user_script ends up with in an image that has
// `accounts`, by the same rule (the two change together): the image's own
// sandbox user renamed and moved to `preferred_uid` when that is free, an
// existing user kept as it is, a new one at the first free id from
// `preferred_uid` on. Lets create (and --preview) refuse a uid clash before
// anything is made.
[[nodiscard]] GuestUser predict_bootstrap_user(const ImageAccounts& accounts, const std::string& user,
                                               int preferred_uid);

// Prints the guest's package manager: apt | dnf | apk | none.
[[nodiscard]] std::string detect_package_manager_script();

// Installs `packages` (already in the manager's own names) non-interactively.
[[nodiscard]] std::vector<std::string> package_install_argv(const std::string& manager,
                                                            const std::vector<std::string>& packages);

}  // namespace agentctl::provider::incus
