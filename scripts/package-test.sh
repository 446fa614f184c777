#!/usr/bin/env bash
# Builds agentctl's .deb from a configured build directory, installs it with
# dpkg, runs the installed binary, removes the package and checks that nothing
# it installed is left. Refuses to run when an agentctl package is already
# installed (it would replace someone's own), unless this script installed it
# in a run that was killed part-way: from before `dpkg -i` until after
# `dpkg -r` it records the version it installs in $AGENTCTL_PACKAGE_OWNED
# (/var/lib/agentctl-package-test, which survives reboots like dpkg's own
# database). Run as root.
#   scripts/package-test.sh [BUILD_DIR]   (default build/test)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/test}
owned=${AGENTCTL_PACKAGE_OWNED:-/var/lib/agentctl-package-test}/installed
fail() { echo "package-test: $*" >&2; exit 1; }
installed() { dpkg-query -W -f='${Status}' agentctl 2>/dev/null | grep -q 'install ok'; }

if installed; then
  [ -s "$owned" ] && [ "$(cat "$owned")" = "$(dpkg-query -W -f='${Version}' agentctl)" ] ||
    fail "an agentctl package is already installed here; not replacing it"
  echo "package-test: removing the agentctl package an earlier run of this test installed and did not remove"
  dpkg -r agentctl >/dev/null
fi
rm -f "$owned"
rm -f "$build"/agentctl_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/agentctl_*.deb)
echo "package: $deb ($(du -k "$deb" | cut -f1) KiB)"
# agentctl opens libssl.so.3 itself (for HTTPS remotes), so no linker-derived dependency names it.
dpkg-deb -f "$deb" Depends | grep -qw libssl3 || fail "the package does not depend on libssl3: $(dpkg-deb -f "$deb" Depends)"

mkdir -p "$(dirname "$owned")"
dpkg-deb -f "$deb" Version >"$owned"  # the version it installs, so that only that one is ever taken for its own
dpkg -i "$deb" >/dev/null
trap 'dpkg -r agentctl >/dev/null 2>&1 && rm -f "$owned"' EXIT
mapfile -t files < <(dpkg -L agentctl)
for expected in /usr/bin/agentctl /usr/share/man/man1/agentctl.1 \
  /usr/share/bash-completion/completions/agentctl /usr/share/zsh/vendor-completions/_agentctl \
  /usr/share/fish/vendor_completions.d/agentctl.fish; do
  [ -f "$expected" ] || fail "the package did not install $expected"
done
# No provider configured and no home to read: the version must still print.
version=$(env -i HOME=/nonexistent PATH=/usr/bin:/bin ASAN_OPTIONS=detect_leaks=0 /usr/bin/agentctl version)
echo "$version"
grep -q '^Version: ' <<<"$version" || fail "agentctl version printed no version"
grep -q '^Backend: ' <<<"$version" || fail "agentctl version printed no backend line"

dpkg -r agentctl >/dev/null
rm -f "$owned"
trap - EXIT
if dpkg-query -W -f='${Status}' agentctl 2>/dev/null | grep -qv 'not-installed'; then
  fail "dpkg still knows agentctl after removal: $(dpkg-query -W -f='${Status}' agentctl)"
fi
for f in "${files[@]}"; do
  if [ -f "$f" ] || [ -L "$f" ]; then fail "left behind after removal: $f"; fi
done
echo "package-test: installed, ran and removed cleanly (${#files[@]} paths)"
