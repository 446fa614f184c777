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

. scripts/as-root.sh
. scripts/build-env.sh

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

# What the tests make on the Incus daemon is theirs alone: a project of their
# own (agentctl-tests; the bridges and ACLs that Incus keeps in the default
# project are marked with it), and records of their own, apart from setup.sh's,
# so that their teardown takes away only what they made. A run that was killed
# left its records: the next run removes what they name before it starts. The
# user's objects are recorded before the tests and compared after them
# (docs/testing.md).
tests_project=agentctl-tests
# The incus client's own configuration for the tests' commands: the user's
# (~/.config/incus, with their default remote and project) is neither read nor
# written.
export INCUS_CONF=/var/lib/agentctl-incus-owned-tests/incus-client
mkdir -p "$INCUS_CONF"
tests_records=(AGENTCTL_INCUS_PROJECT=$tests_project AGENTCTL_INCUS_OWNED=/var/lib/agentctl-incus-owned-tests
  AGENTCTL_INCUS_RUN=/run/agentctl-incus-tests)
user_objects() {
  env "${tests_records[@]}" bash "$root/integration/incus/user_objects.sh" "$1" \
    /var/lib/agentctl-incus-owned-tests/user-objects "$root/build/test/src/agentctl"
}
teardown() { env "${tests_records[@]}" bash "$root/scripts/incus/down.sh"; }
cleanup() {
  teardown >/dev/null 2>&1 || true
  user_objects after >/dev/null 2>&1 || true
}

phase "Incus: what a killed earlier run left"
teardown
user_objects after >/dev/null 2>&1 || true

phase "Incus: what the user has, before the tests"
trap cleanup EXIT
user_objects before

phase "Incus daemon, the tests' project and image"
# The daemon also listens on HTTPS on loopback: the remote suite runs the
# integration suite a second time over it (integration/incus/remote.sh).
env "${tests_records[@]}" AGENTCTL_INCUS_HTTPS=127.0.0.1:8443 AGENTCTL_BIN="$root/build/test/src/agentctl" \
  bash scripts/incus/up.sh

phase "unit, CLI and integration tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Every agentctl and incus command of the tests works in the tests' project.
export INCUS_PROJECT=$tests_project
# Two at a time: the suites that need the machine to themselves are RUN_SERIAL,
# and the tests that ask the daemon take turns (RESOURCE_LOCK incus-daemon).
ctest --test-dir build/test --output-on-failure --timeout 600 -j2
unset INCUS_PROJECT

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

phase "Incus: the tests' teardown, then what the user has, after the tests"
teardown
trap - EXIT
user_objects after
phase "done"
