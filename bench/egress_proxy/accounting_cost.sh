#!/usr/bin/env bash
# What the egress proxy's accounting costs: its per-connection records and
# upload budgets. Four proxies of the same program, side by side in one run,
# with the same allowlist:
#   plain   - as a sandbox's proxy runs: per-connection records, no budget;
#   budget  - the same with a budget on every destination the run uses (large
#             enough never to run out) and a default budget, so every byte it
#             relays is counted;
#   norec   - plain without its per-connection records (no `decision` line
#             of an allowed request, no `close` record: --no-records, which
#             only the suites' egress_proxy_runner takes, never agentctl);
#   again   - plain once more, to show how far apart two identical proxies
#             come out on this host (the noise floor).
# All four are egress_proxy_runner: the same proxy code as `agentctl
# egress-proxy`, in a binary that needs only the proxy's own libraries.
# Figures: upload through CONNECT (what a budget counts), download through
# CONNECT, proxy CPU per MiB, and connection rate and proxy CPU per connection
# (connect+CONNECT+1 KiB GET+close, 32 at a time). Prints a Markdown table.
#
#   sudo bench/egress_proxy/accounting_cost.sh [BUILD_DIR]   (default: build-release, built if needed)
#
# LOG_DIR=DIR puts the proxies' logs in DIR (e.g. /dev/shm, a tmpfs) instead
# of the scratch directory under /tmp: what the records cost with and
# without a disk under them.
#
# They take turns, ROUNDS times (default 5); each figure is the median of
# its rounds and each ratio the median of the rounds' ratios, so a load that
# comes and goes falls on all. The origin (nginx with a 1 KiB and a 100 MiB
# file, and proxy_bench's upload sink) sits at 192.0.3.2 in a network
# namespace the script makes, routed for the run only; nothing leaves the machine.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
TRANSFERS=${TRANSFERS:-5}
SECONDS_RATE=${SECONDS_RATE:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-release}

[ "$(id -u)" = 0 ] || { echo "accounting_cost.sh: needs root to create the origin's network namespace" >&2; exit 1; }
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || {
  echo "installing: nginx-light" >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends nginx-light >&2
  command -v systemctl >/dev/null 2>&1 && systemctl stop nginx >/dev/null 2>&1 || true
}
export PATH=$PATH:/usr/sbin
PROXY=$BUILD/integration/egress_proxy/egress_proxy_runner
PB=$BUILD/bench/proxy_bench
if [ ! -x "$PROXY" ] || [ ! -x "$PB" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAGENTCTL_BENCH=ON -DAGENTCTL_TESTS=ON \
    -DAGENTCTL_WERROR=OFF >&2  # g++ 12 -O3 reports a false -Wrestrict in core/files.cpp
  ninja -C "$BUILD" egress_proxy_runner proxy_bench >&2
fi

. "$ROOT/bench/egress_proxy/origin.sh" acct u
start_origin
LOGS=$WORK
if [ -n "${LOG_DIR:-}" ]; then
  LOGS=$(mktemp -d "$LOG_DIR/agentctl-acct.XXXXXX")
  trap 'stop_origin; rm -rf "$LOGS"' EXIT INT TERM
fi
ip netns exec "$NS" "$PB" sink --listen "$ORIGIN:9" & PIDS+=($!)

# The same allowlist; the budgeted one counts every byte (1 TiB: never spent).
declare -A PORT=([plain]=18121 [budget]=18122 [norec]=18123 [again]=18124) PID
PROXIES="plain budget norec again"
for c in $PROXIES; do
  mkdir -p "$WORK/$c" "$LOGS/$c"
  budgets="" flags=()
  [ "$c" = budget ] && budgets=',"budgets":[{"host":"'$ORIGIN'","port":9,"bytes":1099511627776}],"defaultBudget":1099511627776'
  [ "$c" = norec ] && flags=(--no-records)
  cat > "$WORK/$c/egress-policy.json" <<JSON
{"version":1,"enabled":true,"denyLAN":true,"allowLAN":false,
 "allow":[{"domain":"$ORIGIN","ports":[9,80],"origin":"bench"}],"dns":{"servers":[],"disabled":false}$budgets}
JSON
  "$PROXY" --listen 127.0.0.1:${PORT[$c]} --policy "$WORK/$c/egress-policy.json" \
    --log "$LOGS/$c/egress.log" "${flags[@]}" >/dev/null 2>"$WORK/$c/err" & PID[$c]=$!; PIDS+=("${PID[$c]}")
done
wait_port "$ORIGIN" 80; wait_port "$ORIGIN" 9; for c in $PROXIES; do wait_port 127.0.0.1 "${PORT[$c]}"; done

declare -A R ALL
FIGURES="up cpu_up dl cpu_dl rate cpu_conn"
run_one() {  # name
  local c=$1 via=127.0.0.1:${PORT[$1]} pid=${PID[$1]} before out
  before=$(cpu_us "$pid")
  out=$("$PB" upload --via "$via" --target "$ORIGIN:9" --megabytes 100 --repeat "$TRANSFERS")
  R[$c,up]=$(json "$out" median_MBps)
  R[$c,cpu_up]=$(calc "($(cpu_us "$pid") - $before) / ($(json "$out" bytes) / 1048576)" 1)
  before=$(cpu_us "$pid")
  out=$("$PB" download --via "$via" --target "$ORIGIN:80" --path /100m --repeat "$TRANSFERS")
  R[$c,dl]=$(json "$out" median_MBps)
  R[$c,cpu_dl]=$(calc "($(cpu_us "$pid") - $before) / ($(json "$out" bytes) / 1048576)" 1)
  before=$(cpu_us "$pid")
  out=$("$PB" rate --via "$via" --target "$ORIGIN:80" --path /1k --concurrency 32 --seconds "$SECONDS_RATE")
  R[$c,rate]=$(json "$out" rate)
  R[$c,cpu_conn]=$(calc "($(cpu_us "$pid") - $before) / max(1, $(json "$out" requests))" 1)
}
LOAD_START=$(cut -d' ' -f1 /proc/loadavg)
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round of $ROUNDS" >&2
  # Who goes first rotates, so none always runs on a warmer machine.
  case $((round % 4)) in
    1) order="plain budget norec again" ;; 2) order="budget norec again plain" ;;
    3) order="norec again plain budget" ;; *) order="again plain budget norec" ;;
  esac
  for c in $order; do run_one "$c"; done
  for f in $FIGURES; do
    for c in $PROXIES; do ALL[$c,$f]+=" ${R[$c,$f]}"; done
    for c in budget norec again; do ALL[$c/plain,$f]+=" $(calc "${R[$c,$f]} / max(1e-9, ${R[plain,$f]})" 3)"; done
  done
done
# shellcheck disable=SC2086  # the lists are space-separated on purpose
for f in $FIGURES; do for c in $PROXIES budget/plain norec/plain again/plain; do R[$c,$f]=$(median 3 ${ALL[$c,$f]}); done; done
SENT=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sent'].get('$ORIGIN:9', 0))" "$LOGS/budget/egress.log.budgets" 2>/dev/null || echo "?")

echo
echo "Machine: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r); run $(date -u +%Y-%m-%dT%H:%MZ)"
echo "Load average (1 min) at start: $LOAD_START, at end: $(cut -d' ' -f1 /proc/loadavg); $ROUNDS rounds, each figure the median of its rounds"
echo "Bytes the budgeted proxy counted to $ORIGIN:9 (its budget state file): $SENT"
echo
closes() { cat "$LOGS/$1/egress.log.1" "$LOGS/$1/egress.log" 2>/dev/null | grep -c '"event":"close"' || true; }
echo "Logs in $(df --output=fstype "$LOGS" | tail -1) ($LOGS); close records in the kept log (rotated at 10 MiB): plain $(closes plain), no records $(closes norec)"
echo
echo "| figure | plain: records, no budget | budget on every destination | budget / plain | no records | no records / plain | plain again | again / plain (noise) |"
echo "|---|---|---|---|---|---|---|---|"
row() {
  echo "| $1 | ${R[plain,$2]} | ${R[budget,$2]} | ${R[budget/plain,$2]} | ${R[norec,$2]} | ${R[norec/plain,$2]} |" \
    "${R[again,$2]} | ${R[again/plain,$2]} |"
}
row "upload through CONNECT, MB/s (median of $TRANSFERS x 100 MiB)" up
row "proxy CPU per MiB uploaded, us" cpu_up
row "download through CONNECT, MB/s (median of $TRANSFERS x 100 MiB)" dl
row "proxy CPU per MiB downloaded, us" cpu_dl
row "connect+CONNECT+1 KiB GET+close, c=32, per s" rate
row "proxy CPU per connection, us" cpu_conn
