// The built-in profiles, as YAML text compiled into the binary so that they go
// through the same strict loader as every profile a person writes.
#include <string_view>

#include "policy/profile_store.hpp"

namespace agentctl::policy {
namespace {

constexpr std::string_view k_default = R"(apiVersion: agentctl.dev/v1
kind: Profile
metadata:
  name: default
  description: LAN closed, nothing allowed out, one writable workspace per sandbox
spec:
  network:
    denyLAN: true
  resources:
    cpuCores: 2
    memory: 4GiB
    processes: 2048
    diskSize: 20GiB
  mounts:
    - hostPath: ~/agentctl/workspaces/{{.Name}}
      guestPath: /workspace
      writable: true
  mountPolicy:
    createMissing: true
)";

constexpr std::string_view k_strict = R"(apiVersion: agentctl.dev/v1
kind: Profile
metadata:
  name: strict
  description: smaller sandbox; mounts only below ~/agentctl/workspaces
spec:
  network:
    denyLAN: true
  resources:
    cpuCores: 1
    memory: 2GiB
    processes: 1024
    diskSize: 10GiB
  mounts:
    - hostPath: ~/agentctl/workspaces/{{.Name}}
      guestPath: /workspace
      writable: true
  mountPolicy:
    allowedRoots:
      - ~/agentctl/workspaces
    allowHome: false
    createMissing: true
)";

constexpr std::string_view k_terminal = R"(apiVersion: agentctl.dev/v1
kind: Profile
metadata:
  name: terminal
  description: the default profile plus common command-line development tools
spec:
  network:
    denyLAN: true
  resources:
    cpuCores: 2
    memory: 4GiB
    processes: 2048
    diskSize: 20GiB
  mounts:
    - hostPath: ~/agentctl/workspaces/{{.Name}}
      guestPath: /workspace
      writable: true
  mountPolicy:
    createMissing: true
  packages:
    - ca-certificates
    - curl
    - git
    - openssh-client
    - build-essential
    - python3
    - python3-pip
    - jq
    - ripgrep
    - less
    - vim
    - procps
    - unzip
    - shellcheck
)";

constexpr std::string_view k_gui = R"(apiVersion: agentctl.dev/v1
kind: Profile
metadata:
  name: gui
  description: the terminal profile plus a desktop for `agentctl view`
spec:
  network:
    denyLAN: true
  resources:
    cpuCores: 2
    memory: 4GiB
    processes: 2048
    diskSize: 20GiB
  mounts:
    - hostPath: ~/agentctl/workspaces/{{.Name}}
      guestPath: /workspace
      writable: true
  mountPolicy:
    createMissing: true
  console:
    viewer: spice
  packages:
    - ca-certificates
    - curl
    - git
    - openssh-client
    - build-essential
    - python3
    - python3-pip
    - jq
    - ripgrep
    - less
    - vim
    - procps
    - unzip
    - shellcheck
    - xorg
    - xfce4
    - xterm
    - dbus-x11
    - fonts-dejavu
    - spice-vdagent
)";

struct Builtin {
    std::string_view name;
    std::string_view text;
};

constexpr Builtin k_builtins[] = {
    {"default", k_default},
    {"strict", k_strict},
    {"terminal", k_terminal},
    {"gui", k_gui},
};

}  // namespace

std::optional<std::string_view> builtin_profile_text(std::string_view name) {
    for (const auto& builtin : k_builtins) {
        if (builtin.name == name) return builtin.text;
    }
    return std::nullopt;
}

std::vector<std::string> builtin_profile_names() {
    std::vector<std::string> names;
    for (const auto& builtin : k_builtins) names.emplace_back(builtin.name);
    return names;
}

}  // namespace agentctl::policy
