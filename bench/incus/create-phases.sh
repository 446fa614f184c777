#!/usr/bin/env bash
# create-phases.sh - where `agentctl create` -> first `agentctl exec` spends its time, for a
# confined container sandbox (bridge, ACL, nft table, resolver, egress proxy, user, guest proxy
# settings, probe battery), next to a bare `incus launch` + `incus exec` of the same image with no NIC.
#
# Each step line agentctl prints is stamped with the milliseconds since the command started;
# a phase is the time from its line to the next one. Prints one table per round and the medians.
#
# Usage: bench/incus/create-phases.sh AGENTCTL_BINARY [ROUNDS (3)]
# Uses its own HOME (incus.subnetPool=10.220.0.0/16) and names starting with e10-bench-.
set -uo pipefail
AGENTCTL=${1:?usage: create-phases.sh AGENTCTL_BINARY [ROUNDS]}
ROUNDS=${2:-3}
. "$(dirname "$0")/lib.sh"
bench_start phases
"$AGENTCTL" config set incus.subnetPool=10.220.0.0/16 >/dev/null
cleanup() {
  for i in $(seq "$ROUNDS"); do
    incus delete -f "e10-bench-raw-$i" >/dev/null 2>&1
    "$AGENTCTL" --provider incus delete --force "e10-bench-$i" >/dev/null 2>&1
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# Warm the image's storage (the first launch of an image unpacks it once).
incus launch "$IMAGE" e10-bench-warm -q --no-profiles -s default >/dev/null 2>&1 && incus delete -f e10-bench-warm >/dev/null

# phase NAME -> the label of a step line
label() {
  case "$1" in
    *"creating network ACL"*) echo "acl" ;;
    *"creating bridge"*) echo "bridge (Incus: the bridge, its firewall)" ;;
    *"starting the resolver"*) echo "nft table + policy + resolver spawn" ;;
    *"starting the egress proxy"*) echo "egress proxy spawn" ;;
    *"creating container"*) echo "instance create + start" ;;
    *"creating user"*) echo "user + guest settings (probe battery alongside)" ;;
    *"checking network confinement"*) echo "rest of the probe battery" ;;
    *"probe battery:"*) echo "record confinement" ;;
    *"network confinement"*) echo "mount report" ;;
    *"no host directories"*|*"host directories exposed"*) echo "finish" ;;
    *) echo "" ;;
  esac
}

raw=() agc=() execs=()
for i in $(seq "$ROUNDS"); do
  t=$(now_ms)
  incus launch "$IMAGE" "e10-bench-raw-$i" -q --no-profiles -s default 2>/dev/null && incus exec "e10-bench-raw-$i" -- true
  raw+=($(( $(now_ms) - t )))

  t0=$(date +%s%N)
  "$AGENTCTL" --provider incus create "e10-bench-$i" --image "$IMAGE" --isolation container --mount-none \
    --allow example.com:443 2>&1 | while IFS= read -r line; do echo "$(( ($(date +%s%N) - t0) / 1000000 )) $line"; done \
    >"$WORK/create-$i.log"
  t=$(now_ms)
  "$AGENTCTL" --provider incus exec "e10-bench-$i" -- true
  e=$(( $(now_ms) - t ))
  total=$(( ($(date +%s%N) - t0) / 1000000 ))
  agc+=("$total"); execs+=("$e")
  echo "round $i: agentctl create+exec $total ms (bare incus launch+exec ${raw[-1]} ms)"
  prev=0 prev_label="process start, config, profiles"
  while read -r ms rest; do
    l=$(label "$rest")
    [ -n "$l" ] || continue
    printf '  %-40s %5d ms\n' "$prev_label" $((ms - prev))
    prev=$ms prev_label=$l
  done <"$WORK/create-$i.log"
  printf '  %-40s %5d ms\n' "exit of create" $(( total - e - prev ))
  printf '  %-40s %5d ms\n' "agentctl exec -- true" "$e"
  grep -o "probe battery: .*" "$WORK/create-$i.log" | sed 's/^/  /'
  "$AGENTCTL" --provider incus delete --force "e10-bench-$i" >/dev/null 2>&1
  incus delete -f "e10-bench-raw-$i" >/dev/null 2>&1
done
echo "median: bare incus launch+exec $(printf '%s\n' "${raw[@]}" | median) ms," \
  "agentctl create+exec $(printf '%s\n' "${agc[@]}" | median) ms (exec alone $(printf '%s\n' "${execs[@]}" | median) ms)"
echo "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
