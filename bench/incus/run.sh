#!/usr/bin/env bash
# run.sh - agentctl on Incus against the raw incus client, in one run:
#   1. create -> exec-ready: `agentctl create` + `agentctl exec -- true`, without
#      and with the warm pool (incus.pool.size=1; the pool is full before each
#      timed create, and refills in the background while the exec runs),
#      vs `incus launch` (on a bridge of its own) + `incus exec -- true`, same image
#   2. `agentctl status` and `agentctl list` latency
# Containers (this kind of host cannot run VMs). Prints medians in ms.
#
# Usage: bench/incus/run.sh AGENTCTL_BINARY [ROUNDS (3)] [QUERIES (20)]
set -uo pipefail
AGENTCTL=${1:?usage: run.sh AGENTCTL_BINARY [ROUNDS] [QUERIES]}
ROUNDS=${2:-3}
QUERIES=${3:-20}
RAW_BRIDGE=agcbenchraw0
RAW_SUBNET=10.213.255.241/28   # the pool's last /28; agentctl takes the first free ones
. "$(dirname "$0")/lib.sh"
bench_start bench
# The pool's agentctl: a HOME of its own, so that only its creates take entries.
pooled() { HOME=$WORK/pool XDG_CONFIG_HOME=$WORK/pool/.config "$AGENTCTL" --provider incus "$@"; }
cleanup() {
  for i in $(seq "$ROUNDS"); do
    incus delete -f "bench-raw-$i" >/dev/null 2>&1
    "$AGENTCTL" --provider incus delete --force "bench-agc-$i" >/dev/null 2>&1
    pooled delete --force "bench-pool-$i" >/dev/null 2>&1
  done
  pooled pool drain >/dev/null 2>&1  # after a refill under way (it holds the pool's lock)
  incus network delete "$RAW_BRIDGE" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
raw_bridge "$RAW_BRIDGE" "$RAW_SUBNET"

# Warm the image's storage (the first launch of an image unpacks it once).
incus launch "$IMAGE" bench-warm --network "$RAW_BRIDGE" -q && incus delete -f bench-warm >/dev/null

mkdir -p "$WORK/pool"
pooled config set incus.pool.size=1 >/dev/null
raw=() agc=() pool=()
for i in $(seq "$ROUNDS"); do
  t=$(now_ms)
  incus launch "$IMAGE" "bench-raw-$i" --network "$RAW_BRIDGE" -q && incus exec "bench-raw-$i" -- true
  raw+=($(( $(now_ms) - t )))
  t=$(now_ms)
  "$AGENTCTL" --provider incus create "bench-agc-$i" --image "$IMAGE" --isolation container --mount-none \
    >"$WORK/create.log" 2>&1 || { cat "$WORK/create.log"; exit 1; }
  "$AGENTCTL" --provider incus exec "bench-agc-$i" -- true
  agc+=($(( $(now_ms) - t )))
  pooled pool fill >"$WORK/fill.log" 2>&1 || { cat "$WORK/fill.log"; exit 1; }
  t=$(now_ms)
  pooled create "bench-pool-$i" --image "$IMAGE" --isolation container --mount-none >"$WORK/create.log" 2>&1 ||
    { cat "$WORK/create.log"; exit 1; }
  pooled exec "bench-pool-$i" -- true
  pool+=($(( $(now_ms) - t )))
  grep -q "from the warm pool" "$WORK/create.log" || { echo "bench-pool-$i was not taken from the pool:"; cat "$WORK/create.log"; exit 1; }
  pooled pool fill >/dev/null 2>&1  # the refill ends before the next round's launches are timed
done
raw_med=$(printf '%s\n' "${raw[@]}" | median)
agc_med=$(printf '%s\n' "${agc[@]}" | median)
pool_med=$(printf '%s\n' "${pool[@]}" | median)

st=() ls=()
for _ in $(seq "$QUERIES"); do
  t=$(date +%s%N); "$AGENTCTL" --provider incus status bench-agc-1 >/dev/null; st+=($(( ($(date +%s%N) - t) / 1000 )))
  t=$(date +%s%N); "$AGENTCTL" --provider incus list >/dev/null; ls+=($(( ($(date +%s%N) - t) / 1000 )))
done
us_to_ms() { awk '{printf "%.1f\n", $1 / 1000}'; }

echo "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), incus $(incus version | awk '/Server/{print $3}')"
echo "create->exec-ready, container, $ROUNDS rounds (ms): raw incus launch+exec ${raw[*]} | agentctl create+exec ${agc[*]}"
echo "  agentctl with the warm pool ${pool[*]}"
echo "  median raw ${raw_med} ms, agentctl ${agc_med} ms (ratio $(awk -v a="$agc_med" -v r="$raw_med" 'BEGIN{printf "%.2f", a/r}')), with the pool ${pool_med} ms (ratio $(awk -v a="$pool_med" -v r="$raw_med" 'BEGIN{printf "%.2f", a/r}'))"
echo "agentctl status, $QUERIES runs: median $(printf '%s\n' "${st[@]}" | median | us_to_ms) ms, p95 $(printf '%s\n' "${st[@]}" | p95 | us_to_ms) ms"
echo "agentctl list,   $QUERIES runs: median $(printf '%s\n' "${ls[@]}" | median | us_to_ms) ms, p95 $(printf '%s\n' "${ls[@]}" | p95 | us_to_ms) ms"
