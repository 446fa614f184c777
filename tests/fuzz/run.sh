#!/bin/sh
# Builds the libFuzzer targets in their own build directory and runs each for
# a number of seconds (the argument, else $AGENTCTL_FUZZ_SECONDS, else 60).
# Usage: tests/fuzz/run.sh [SECONDS]
# Needs clang-14 and libclang-rt-14-dev. Exits non-zero when a target crashes,
# leaks or hangs (a single input running over 10 s counts as a hang).
set -eu
seconds="${1:-${AGENTCTL_FUZZ_SECONDS:-60}}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${AGENTCTL_FUZZ_BUILD:-$root/build-fuzz}"
jobs="${AGENTCTL_FUZZ_JOBS:-2}"

launcher=""
command -v ccache >/dev/null 2>&1 && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
cmake -S "$root" -B "$build" -G Ninja $launcher \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 \
  -DAGENTCTL_FUZZ=ON -DAGENTCTL_SANITIZE=ON -DAGENTCTL_TESTS=OFF >/dev/null
ninja -C "$build" -j "$jobs" fuzz_allow_entry fuzz_profile_loader fuzz_proxy_request

# The targets run side by side (each for SECONDS), each into a log of its own,
# printed once all have ended.
targets="allow_entry profile_loader proxy_request"
pids=""
for target in $targets; do
  corpus="$build/corpus-$target"
  mkdir -p "$corpus" "$build/artifacts-$target"
  "$build/tests/fuzz/fuzz_$target" "$corpus" "$root/tests/fuzz/corpus/$target" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -artifact_prefix="$build/artifacts-$target/" -print_final_stats=1 >"$build/fuzz_$target.log" 2>&1 &
  pids="$pids $!"
done
status=0
set -- $pids
for target in $targets; do
  pid=$1
  shift
  if wait "$pid"; then result=passed; else result=FAILED; status=1; fi
  echo "== fuzz_$target for ${seconds}s: $result"
  if [ "$result" = FAILED ]; then
    cat "$build/fuzz_$target.log"
    echo "fuzz_$target FAILED; the input is in $build/artifacts-$target/" >&2
  else
    grep '^Done ' "$build/fuzz_$target.log" || true
  fi
done
exit "$status"
