#!/usr/bin/env bash
# exec.sh - `agentctl exec` against `incus exec`, in one run, on two containers
# of the same image (agentctl's sandbox confined, the raw one on a bridge of
# its own): the latency of `exec -- true` (median and p95 of N rounds) and
# the throughput of a 1 GiB stdin -> stdout copy through `cat`.
#
# Usage: bench/incus/exec.sh AGENTCTL_BINARY [ROUNDS (20)] [MIB (1024)]
set -uo pipefail
AGENTCTL=${1:?usage: exec.sh AGENTCTL_BINARY [ROUNDS] [MIB]}
ROUNDS=${2:-20}
MIB=${3:-1024}
RAW_BRIDGE=agcbenchx0
RAW_SUBNET=10.213.255.225/28
AGC=bench-exec-agc-$$
RAW=bench-exec-raw-$$
. "$(dirname "$0")/lib.sh"
bench_start bench-exec
cleanup() {
  incus delete -f "$RAW" >/dev/null 2>&1
  "$AGENTCTL" --provider incus delete --force "$AGC" >/dev/null 2>&1
  incus network delete "$RAW_BRIDGE" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
raw_bridge "$RAW_BRIDGE" "$RAW_SUBNET"
incus launch "$IMAGE" "$RAW" --network "$RAW_BRIDGE" -q || exit 1
"$AGENTCTL" --provider incus create "$AGC" --image "$IMAGE" --isolation container --mount-none >/dev/null 2>&1 ||
  { echo "agentctl create failed"; exit 1; }
until incus exec "$RAW" -- true 2>/dev/null; do sleep 0.1; done

agc=() raw=()
for _ in $(seq "$ROUNDS"); do
  t=$(now_ms); "$AGENTCTL" --provider incus exec "$AGC" -- true; agc+=($(( $(now_ms) - t )))
  t=$(now_ms); incus exec "$RAW" -- true; raw+=($(( $(now_ms) - t )))
done
printf '%-36s %8s %8s\n' "exec -- true ($ROUNDS rounds, ms)" median p95
printf '%-36s %8s %8s\n' "  agentctl exec" "$(printf '%s\n' "${agc[@]}" | median)" "$(printf '%s\n' "${agc[@]}" | p95)"
printf '%-36s %8s %8s\n' "  incus exec" "$(printf '%s\n' "${raw[@]}" | median)" "$(printf '%s\n' "${raw[@]}" | p95)"

copy() {  # copy LABEL CMD...: MIB MiB of zeros through `cat` in the guest; prints MiB/s
  local label=$1 t bytes ms
  shift
  t=$(now_ms)
  bytes=$(head -c "${MIB}M" /dev/zero | "$@" -- cat | wc -c)
  ms=$(( $(now_ms) - t ))
  [ "$bytes" = $((MIB * 1048576)) ] || echo "  $label: only $bytes bytes came back"
  printf '%-36s %8s ms %8s MiB/s\n' "  $label" "$ms" "$(( MIB * 1000 / (ms > 0 ? ms : 1) ))"
}
echo "stdin -> stdout copy of $MIB MiB"
copy "agentctl exec" "$AGENTCTL" --provider incus exec "$AGC"
copy "incus exec" incus exec "$RAW"
