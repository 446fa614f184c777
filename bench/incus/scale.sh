#!/usr/bin/env bash
# scale.sh - N idle sandboxes on this host (default 100), then:
#   1. `agentctl list` and `agentctl status NAME` times (median and p95, ms)
#   2. the RSS of each sandbox's egress proxy and resolver (mean per sandbox, MiB)
# Containers with the default network policy (each has its proxy and resolver).
# The sandboxes are named agentctl-scale-PID-I (no user picks that) and are all
# deleted at the end, also when the bench fails or is interrupted.
#
# Usage: bench/incus/scale.sh AGENTCTL_BINARY [N (100)] [QUERIES (20)] [PARALLEL (4)] [BASELINE_BINARY]
# With BASELINE_BINARY (another build of agentctl), `list` and `status` are
# also timed with it, the two builds taking turns on the same host: the
# baseline creates the odd-numbered sandboxes and is timed on those, the build
# under test the even-numbered ones (what status reads was recorded by the
# build that made the sandbox); both list all of them.
# Use a release build: a sanitizer build's proxy is several times bigger.
set -uo pipefail
AGENTCTL=${1:?usage: scale.sh AGENTCTL_BINARY [N] [QUERIES] [PARALLEL] [BASELINE_BINARY]}
BASELINE=${5:-}
N=${2:-100}
QUERIES=${3:-20}
PARALLEL=${4:-4}
PREFIX=agentctl-scale-$$
. "$(dirname "$0")/lib.sh"
bench_start scale
export XDG_STATE_HOME=$WORK/home/.local/state
agentctl() { "$AGENTCTL" --provider incus "$@"; }
export -f agentctl
export AGENTCTL IMAGE BASELINE

names() { seq "$N" | sed "s/^/$PREFIX-/"; }
cleanup() {
  trap - EXIT INT TERM
  echo "# deleting the $N sandboxes"
  names | xargs -P "$PARALLEL" -I{} bash -c 'agentctl delete --force {} >/dev/null 2>&1'
  local left
  left=$(incus list -f csv -c n | grep -c "^$PREFIX-")
  [ "$left" = 0 ] || echo "# $left sandboxes could not be deleted: agentctl delete --force $PREFIX-..."
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- N idle sandboxes
began=$(now_ms)
names | xargs -P "$PARALLEL" -I{} bash -c \
  'bin=$AGENTCTL; i={}; [ -n "$BASELINE" ] && [ $(( ${i##*-} % 2 )) = 1 ] && bin=$BASELINE
   "$bin" --provider incus create {} --image "$IMAGE" --isolation container --mount-none >/dev/null 2>&1 ||
     echo "create {} failed"'
running=$(incus list -f csv -c ns | grep -c "^$PREFIX-[0-9]*,RUNNING$")
echo "# $running of $N sandboxes created and running in $(( ($(now_ms) - began) / 1000 )) s ($PARALLEL at a time)"
[ "$running" = "$N" ] || { echo "not every sandbox runs: the figures would not be for $N"; exit 1; }
created=$(now_ms)

# ---------------------------------------------------------------- list and status
list_ms=() status_ms=() base_list_ms=() base_status_ms=()
# A time is status's whole work only for a sandbox it finds verified.
verified() { grep -Eq '^Confinement: +verified' "$WORK/status" || { echo "status $1 is not verified:"; cat "$WORK/status"; exit 1; }; }
for _ in $(seq "$QUERIES"); do
  name=$PREFIX-$(( RANDOM % N + 1 ))
  [ -z "$BASELINE" ] || name=$PREFIX-$(( (RANDOM % (N / 2)) * 2 + 2 ))
  t=$(now_ms); agentctl list >/dev/null || exit 1; list_ms+=($(( $(now_ms) - t )))
  t=$(now_ms); agentctl status "$name" >"$WORK/status" || exit 1; status_ms+=($(( $(now_ms) - t )))
  verified "$name"
  [ -n "$BASELINE" ] || continue
  name=$PREFIX-$(( (RANDOM % (N / 2)) * 2 + 1 ))
  t=$(now_ms); "$BASELINE" --provider incus list >/dev/null || exit 1; base_list_ms+=($(( $(now_ms) - t )))
  t=$(now_ms); "$BASELINE" --provider incus status "$name" >"$WORK/status" || exit 1; base_status_ms+=($(( $(now_ms) - t )))
  verified "$name"
done
figures() { echo "median $(printf '%s\n' "$@" | median) ms, p95 $(printf '%s\n' "$@" | p95) ms"; }
echo "list with $N sandboxes: $(figures "${list_ms[@]}")${BASELINE:+ (baseline: $(figures "${base_list_ms[@]}"))}"
echo "status with $N sandboxes: $(figures "${status_ms[@]}")${BASELINE:+ (baseline: $(figures "${base_status_ms[@]}"))}"

# ---------------------------------------------------------------- RSS of the proxy and resolver per sandbox
# Idle means idle: a proxy gives up the pages its connections ran a minute after its last
# connection (create's probe battery; docs/egress-proxy.md), so read them once the last
# create is 65 s old.
idle_in=$(( created + 65000 - $(now_ms) ))
[ "$idle_in" -le 0 ] || { echo "# waiting $(( idle_in / 1000 + 1 )) s for the proxies to be idle"; sleep $(( idle_in / 1000 + 1 )); }
# Their pids as status reports them (the processes agentctl recorded starting).
# RSS counts the pages the processes share (the agentctl and dnsmasq executables, libc) in
# full for each; PSS divides each shared page among its users: what one more sandbox costs.
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
pss_kib() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
proxy_total=0 resolver_total=0 proxy_pss=0 resolver_pss=0 counted=0
for name in $(names); do
  read -r proxy resolver < <(agentctl status "$name" --output json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print((d.get("egressProxy") or {}).get("pid") or 0, (d.get("resolver") or {}).get("pid") or 0)')
  [ "$proxy" -gt 0 ] && [ "$resolver" -gt 0 ] || continue
  proxy_total=$(( proxy_total + $(rss_kib "$proxy") ))
  resolver_total=$(( resolver_total + $(rss_kib "$resolver") ))
  proxy_pss=$(( proxy_pss + $(pss_kib "$proxy") ))
  resolver_pss=$(( resolver_pss + $(pss_kib "$resolver") ))
  counted=$(( counted + 1 ))
done
[ "$counted" -gt 0 ] || { echo "no sandbox reported its proxy and resolver"; exit 1; }
per_sandbox() {
  python3 -c 'import sys; w = sys.argv[1]; p, r, n = map(int, sys.argv[2:]); print("%s per idle sandbox (%d measured): proxy %.1f MiB, resolver %.1f MiB, together %.1f MiB" % (w, n, p / n / 1024, r / n / 1024, (p + r) / n / 1024))' "$@"
}
per_sandbox RSS "$proxy_total" "$resolver_total" "$counted"
per_sandbox PSS "$proxy_pss" "$resolver_pss" "$counted"
free -m | awk '/^Mem:/ {print "# host memory used with the sandboxes: " $3 " MiB of " $2 " MiB"}'
