#!/usr/bin/env bash
# Runs agentctl's whole test suite: formatting, unit and CLI tests (ASan+UBSan),
# short fuzzing runs, the integration suites against a real Incus daemon that
# this script brings up and tears down, and the egress proxy again under
# ThreadSanitizer. Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
phase() { printf '\n==> [%4ss] %s\n' "$(( $(date +%s) - start ))" "$*"; }

[ "$(id -u)" -eq 0 ] || { echo "agentctl: the tests need root (network namespaces, Incus): sudo $0" >&2; exit 1; }

phase "dependencies"
bash scripts/install-deps.sh

phase "formatting (clang-format-14)"
bash scripts/check-format.sh

phase "build (Debug, warnings as errors, ASan+UBSan)"
# Line tables only (-g1): sanitizer reports keep file:line, and the build stays
# well inside CI's time on two cores.
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
  -DAGENTCTL_SANITIZE=ON -DAGENTCTL_WERROR=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build/test

phase "package (.deb: install, run, remove)"
bash scripts/package-test.sh build/test

phase "fuzzing (short runs)"
if [ -x tests/fuzz/run.sh ]; then
  AGENTCTL_FUZZ_SECONDS=${AGENTCTL_FUZZ_SECONDS:-30} sh tests/fuzz/run.sh
fi

phase "Incus daemon and test image"
cleanup() { bash "$root/scripts/incus/down.sh" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# The daemon also listens on HTTPS on loopback: the remote suite runs the
# integration suite a second time over it (integration/incus/remote.sh).
AGENTCTL_INCUS_HTTPS=127.0.0.1:8443 AGENTCTL_BIN="$root/build/test/src/agentctl" bash scripts/incus/up.sh

phase "unit, CLI and integration tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build/test --output-on-failure --timeout 600

phase "egress proxy under ThreadSanitizer (its event loops share the policy, the log and the cap)"
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
  -DAGENTCTL_TSAN=ON -DAGENTCTL_WERROR=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build/tsan --target unit_egress_proxy integration_egress_proxy
# Every process (the tests and each proxy they start) writes its reports to
# build/tsan/race.PID; any such file fails the run, and is printed. The three
# bulk tests (1 GiB uploads, 128 MiB each way, 10k tunnels) take minutes under
# ThreadSanitizer and touch no state shared between the loops that the other
# tests leave alone.
rm -f build/tsan/race.*
tsan_status=0
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$root/build/tsan/race"
build/tsan/tests/unit_egress_proxy || tsan_status=1
build/tsan/integration/egress_proxy/integration_egress_proxy \
  "~large uploads stream through*" "~bulk through CONNECT: 128 MiB*" "~10k concurrent idle tunnels*" || tsan_status=1
unset TSAN_OPTIONS
if compgen -G "build/tsan/race.*" >/dev/null; then
  cat build/tsan/race.*
  echo "agentctl: ThreadSanitizer reported a data race (above)" >&2
  tsan_status=1
fi
[ "$tsan_status" -eq 0 ] || exit 1
phase "done"
