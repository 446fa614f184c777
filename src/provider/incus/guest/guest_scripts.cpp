#include "provider/incus/guest/guest_scripts.hpp"

#include <algorithm>
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

namespace {

// One line of /etc/passwd or /etc/group, split at ':' (empty fields kept).
std::vector<std::string> account_fields(const std::string& line) {
    std::vector<std::string> fields;
    std::string field;
    std::istringstream in(line);
    while (std::getline(in, field, ':')) fields.push_back(field);
    if (!line.empty() && line.back() == ':') fields.emplace_back();
    return fields;
}

std::optional<int> account_id(const std::string& text) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) {
        return std::nullopt;
    }
    return std::stoi(text);
}

struct Account {
    std::string name;
    int id = 0;   // uid (passwd) or gid (group)
    int gid = 0;  // passwd only
    std::string comment, home, shell;
};

std::vector<Account> parse_accounts(const std::string& text, bool passwd) {
    std::vector<Account> accounts;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        const auto f = account_fields(line);
        if (f.size() < (passwd ? 7U : 3U) || f[0].empty()) continue;
        const auto id = account_id(f[2]);
        const auto gid = passwd ? account_id(f[3]) : id;
        if (!id || !gid) continue;
        Account account{f[0], *id, *gid, {}, {}, {}};
        if (passwd) {
            account.comment = f[4];
            account.home = f[5];
            account.shell = f[6];
        }
        accounts.push_back(account);
    }
    return accounts;
}

}  // namespace

GuestUser predict_bootstrap_user(const ImageAccounts& accounts, const std::string& user, int preferred_uid) {
    auto users = parse_accounts(accounts.passwd, true);
    auto groups = parse_accounts(accounts.group, false);
    const auto named = [](auto& list, const std::string& name) {
        auto it = std::find_if(list.begin(), list.end(), [&](const Account& a) { return a.name == name; });
        return it == list.end() ? nullptr : &*it;
    };
    // uid_free: neither a user nor a group has the id.
    const auto id_free = [&](int id) {
        const auto has = [id](const Account& a) { return a.id == id; };
        return std::none_of(users.begin(), users.end(), has) && std::none_of(groups.begin(), groups.end(), has);
    };
    const auto image_user =
        std::find_if(users.begin(), users.end(), [](const Account& a) { return a.comment == k_image_user_comment; });
    if (image_user != users.end() && image_user->name != user && !named(users, user) && !named(groups, user)) {
        // usermod -l USER -d /home/USER -m IMG; groupmod -n USER (IMG's primary group)
        for (auto& group : groups) {
            if (group.id == image_user->gid) group.name = user;
        }
        image_user->name = user;
        image_user->home = "/home/" + user;
    }
    if (auto* existing = named(users, user); existing && existing->id != preferred_uid &&
                                             existing->comment == k_image_user_comment && id_free(preferred_uid)) {
        // groupmod -g PREF USER; usermod -u PREF -g PREF USER
        if (auto* group = named(groups, user)) group->id = preferred_uid;
        existing->id = preferred_uid;
        existing->gid = preferred_uid;
    }
    if (const auto* existing = named(users, user)) {
        return GuestUser{user, existing->id, existing->gid, existing->home, existing->shell};
    }
    int uid = preferred_uid;
    while (!id_free(uid)) ++uid;
    // groupadd -g UID USER, or (a group USER exists already) useradd -g USER joins it
    const auto* group = named(groups, user);
    return GuestUser{user, uid, group ? group->id : uid, "/home/" + user, "/bin/bash"};
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
