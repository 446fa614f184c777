#!/usr/bin/env bash
# Installs everything agentctl needs to build and test, from Debian's packages.
# Idempotent; run as root on Debian 12 (bookworm).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libboost-dev libboost-filesystem-dev libboost-system-dev libssl-dev catch2
  clang-14 libclang-rt-14-dev clang-format-14
  iproute2 python3 curl procps openssl  # openssl: the remote suite makes client certificates
  zsh fish groff-base  # completion scripts and the man page are checked by the shells and groff
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "agentctl: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
