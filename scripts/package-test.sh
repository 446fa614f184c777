#!/usr/bin/env bash
# Builds agentctl's .deb from a configured build directory, installs it with
# dpkg, runs the installed binary, removes the package and checks that nothing
# it installed is left. Refuses to run when an agentctl package is already
# installed (it would replace someone's own). Run as root.
#   scripts/package-test.sh [BUILD_DIR]   (default build/test)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/test}
fail() { echo "package-test: $*" >&2; exit 1; }

if dpkg-query -W -f='${Status}' agentctl 2>/dev/null | grep -q 'install ok'; then
  fail "an agentctl package is already installed here; not replacing it"
fi
rm -f "$build"/agentctl_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/agentctl_*.deb)
echo "package: $deb ($(du -k "$deb" | cut -f1) KiB)"

dpkg -i "$deb" >/dev/null
trap 'dpkg -r agentctl >/dev/null 2>&1 || true' EXIT
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
trap - EXIT
if dpkg-query -W -f='${Status}' agentctl 2>/dev/null | grep -qv 'not-installed'; then
  fail "dpkg still knows agentctl after removal: $(dpkg-query -W -f='${Status}' agentctl)"
fi
for f in "${files[@]}"; do
  if [ -f "$f" ] || [ -L "$f" ]; then fail "left behind after removal: $f"; fi
done
echo "package-test: installed, ran and removed cleanly (${#files[@]} paths)"
