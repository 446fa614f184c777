#include "provider/incus/guest/guest_scripts.hpp"

#include <sstream>

#include <fmt/format.h>

#include "agentctl/process.hpp"

namespace agentctl::provider::incus {

std::string bootstrap_user_script(const std::string& user, int preferred_uid) {
    // `user` is validated by the caller ([a-z_][a-z0-9_-]*), and quoted anyway.
    return fmt::format(R"SH(set -eu
u={user}
pref={uid}
uid_free() {{ ! grep -q "^[^:]*:[^:]*:$1:" /etc/passwd && ! grep -q "^[^:]*:[^:]*:$1:" /etc/group; }}
# The image's own sandbox user under another name (--agent names the user
# after the agent): it becomes this user, with its uid and home.
img=$(awk -F: -v c={comment_q} '$5 == c {{ print $1; exit }}' /etc/passwd)
if [ -n "$img" ] && [ "$img" != "$u" ] && ! id -u "$u" >/dev/null 2>&1 && ! grep -q "^$u:" /etc/group; then
  usermod -l "$u" -d "/home/$u" -m "$img" && groupmod -n "$u" "$(id -gn "$u")"
fi
# The image's own sandbox user, at another uid than the writable mounts need: move it.
if [ "$(id -u "$u" 2>/dev/null)" != "$pref" ] && grep -q "^$u:[^:]*:[0-9]*:[0-9]*:{comment}:" /etc/passwd && uid_free "$pref"; then
  groupmod -g "$pref" "$u" && usermod -u "$pref" -g "$pref" "$u"
fi
if ! id -u "$u" >/dev/null 2>&1; then
  sh_path=/bin/sh
  [ -x /bin/bash ] && sh_path=/bin/bash
  uid=$pref
  while ! uid_free "$uid"; do uid=$((uid+1)); done
  if command -v useradd >/dev/null 2>&1; then
    groupadd -g "$uid" "$u" 2>/dev/null || groupadd "$u"
    useradd -m -u "$uid" -g "$u" -s "$sh_path" "$u"
  else
    addgroup -g "$uid" "$u" 2>/dev/null || addgroup "$u"
    adduser -D -u "$uid" -G "$u" -s "$sh_path" "$u"
  fi
fi
mkdir -p /etc/sudoers.d
printf '%s ALL=(ALL) NOPASSWD:ALL\n' "$u" >/etc/sudoers.d/90-agentctl-"$u".tmp
chmod 0440 /etc/sudoers.d/90-agentctl-"$u".tmp
mv /etc/sudoers.d/90-agentctl-"$u".tmp /etc/sudoers.d/90-agentctl-"$u"
mkdir -p /etc/profile.d
cat >/etc/profile.d/agentctl-path.sh <<'PROFILE'
# agentctl: the user's own bin directories (agents install there) on PATH
if [ "$(id -u)" -ne 0 ]; then
  case ":$PATH:" in *":$HOME/.local/bin:"*) ;; *) PATH="$HOME/.local/bin:$HOME/.npm-global/bin:$PATH" ;; esac
  NPM_CONFIG_PREFIX="$HOME/.npm-global"
  export PATH NPM_CONFIG_PREFIX
fi
PROFILE
line=$(grep "^$u:" /etc/passwd)
home=$(echo "$line" | cut -d: -f6)
mkdir -p "$home"
chown "$(id -u "$u"):$(id -g "$u")" "$home"
echo "agentctl-user $u $(id -u "$u") $(id -g "$u") $home $(echo "$line" | cut -d: -f7)"
)SH",
                       fmt::arg("user", shell_quote(user)), fmt::arg("uid", preferred_uid),
                       fmt::arg("comment", k_image_user_comment),
                       fmt::arg("comment_q", shell_quote(std::string(k_image_user_comment))));
}

std::optional<GuestUser> parse_bootstrap_output(const std::string& output) {
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        std::string tag;
        GuestUser user;
        if (fields >> tag && tag == "agentctl-user" && fields >> user.name >> user.uid >> user.gid >> user.home) {
            if (!(fields >> user.shell)) user.shell = "/bin/sh";
            return user;
        }
    }
    return std::nullopt;
}

std::string detect_package_manager_script() {
    return "for m in apt-get dnf apk; do if command -v $m >/dev/null 2>&1; then "
           "[ $m = apt-get ] && echo apt || echo $m; exit 0; fi; done; echo none";
}

std::vector<std::string> package_install_argv(const std::string& manager, const std::vector<std::string>& packages) {
    std::string list;
    for (const auto& p : packages) list.append(" ").append(shell_quote(p));
    std::string script;
    if (manager == "apt") {
        script =
            "export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q "
            "--no-install-recommends" +
            list;
    } else if (manager == "dnf") {
        script = "dnf install -y" + list;
    } else if (manager == "apk") {
        script = "apk add --no-cache" + list;
    }
    return {"/bin/sh", "-c", script};
}

}  // namespace agentctl::provider::incus
