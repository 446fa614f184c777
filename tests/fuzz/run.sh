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

status=0
for target in allow_entry profile_loader proxy_request; do
  corpus="$build/corpus-$target"
  mkdir -p "$corpus" "$build/artifacts-$target"
  echo "== fuzz_$target for ${seconds}s"
  if ! "$build/tests/fuzz/fuzz_$target" "$corpus" "$root/tests/fuzz/corpus/$target" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
      -artifact_prefix="$build/artifacts-$target/" -print_final_stats=1; then
    echo "fuzz_$target FAILED; the input is in $build/artifacts-$target/" >&2
    status=1
  fi
done
exit "$status"
