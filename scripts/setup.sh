#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a real, confined sandbox:
# installs the dependencies, builds and installs agentctl, brings up Incus with a
# locally built image, then creates a sandbox with a default-deny allowlist and
# runs a command in it as the non-root user.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "agentctl: run this as root (sudo $0)" >&2; exit 1; }

bash scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DAGENTCTL_TESTS=OFF -DAGENTCTL_WERROR=OFF >/dev/null
cmake --build build/release --target agentctl
cmake --install build/release --prefix /usr/local >/dev/null
echo "agentctl: installed $(/usr/local/bin/agentctl --version) to /usr/local/bin"

AGENTCTL_BIN=/usr/local/bin/agentctl bash scripts/incus/up.sh

agentctl config set provider=incus
# A sandbox called demo that already exists is someone's: use it as it is, never delete it.
if agentctl status demo >/dev/null 2>&1; then
  echo "agentctl: a sandbox called 'demo' already exists; setup leaves it as it is (not recreated)"
else
  # This machine cannot run Incus virtual machines (see docs/setup-incus.md), so the
  # demo asks for container isolation explicitly; agentctl says so loudly. The
  # image is the default one (incus.image), which up.sh built.
  agentctl create demo --isolation container --mount-none
fi
agentctl exec demo -- sh -c 'echo "inside the sandbox as $(whoami) (uid $(id -u))"'
agentctl status demo
echo "agentctl: the sandbox 'demo' is running; try: agentctl shell demo    (remove it with: agentctl delete demo --force)"
