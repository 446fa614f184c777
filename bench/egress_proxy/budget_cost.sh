#!/usr/bin/env bash
# What upload-budget accounting costs agentctl's egress proxy: proxies from
# the same build, side by side in one run, with the same allowlist; one has no
# budget, one a budget on every destination the run uses (large enough never to
# run out) and a default budget, so every byte it relays is counted, and a third
# is the first again, to show how far apart two identical proxies come out on
# this host. Each writes its per-connection records as always. Figures: upload
# through CONNECT (what a budget counts), download through CONNECT, proxy CPU
# per MiB, and connection rate and proxy CPU per connection
# (connect+CONNECT+1 KiB GET+close, 32 at a time). Prints a Markdown table.
#
#   sudo bench/egress_proxy/budget_cost.sh [BUILD_DIR]   (default: build-release, built if needed)
#
# PROXY=PATH runs that program as the proxy instead of `agentctl egress-proxy`
# with the same flags: the suites' egress_proxy_runner is the same proxy code
# in a binary that needs only the proxy's own libraries built.
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

[ "$(id -u)" = 0 ] || { echo "budget_cost.sh: needs root to create the origin's network namespace" >&2; exit 1; }
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || {
  echo "installing: nginx-light" >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends nginx-light >&2
  command -v systemctl >/dev/null 2>&1 && systemctl stop nginx >/dev/null 2>&1 || true
}
export PATH=$PATH:/usr/sbin
PROXY=${PROXY:-}
if { [ -z "$PROXY" ] && [ ! -x "$BUILD/src/agentctl" ]; } || [ ! -x "$BUILD/bench/proxy_bench" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAGENTCTL_BENCH=ON -DAGENTCTL_TESTS=OFF \
    -DAGENTCTL_WERROR=OFF >&2  # g++ 12 -O3 reports a false -Wrestrict in core/files.cpp
  ninja -C "$BUILD" agentctl proxy_bench >&2
fi
if [ -n "$PROXY" ]; then PROXY_CMD=("$PROXY"); else PROXY_CMD=("$BUILD/src/agentctl" egress-proxy); fi
PB=$BUILD/bench/proxy_bench

. "$ROOT/bench/egress_proxy/origin.sh" budget u
start_origin
ip netns exec "$NS" "$PB" sink --listen "$ORIGIN:9" & PIDS+=($!)

# The same allowlist; the budgeted one counts every byte (1 TiB: never spent).
# `again` is a second proxy exactly like `plain`: how far apart those two are
# is how far apart this host puts two identical runs (the noise floor).
declare -A PORT=([plain]=18121 [budget]=18122 [again]=18123) PID
PROXIES="plain budget again"
for c in $PROXIES; do
  mkdir -p "$WORK/$c"
  budgets=""
  [ "$c" = budget ] && budgets=',"budgets":[{"host":"'$ORIGIN'","port":9,"bytes":1099511627776}],"defaultBudget":1099511627776'
  cat > "$WORK/$c/egress-policy.json" <<JSON
{"version":1,"enabled":true,"denyLAN":true,"allowLAN":false,
 "allow":[{"domain":"$ORIGIN","ports":[9,80],"origin":"bench"}],"dns":{"servers":[],"disabled":false}$budgets}
JSON
  "${PROXY_CMD[@]}" --listen 127.0.0.1:${PORT[$c]} --policy "$WORK/$c/egress-policy.json" \
    --log "$WORK/$c/egress.log" >/dev/null 2>"$WORK/$c/err" & PID[$c]=$!; PIDS+=("${PID[$c]}")
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
  case $((round % 3)) in
    1) order="plain budget again" ;; 2) order="budget again plain" ;; *) order="again plain budget" ;;
  esac
  for c in $order; do run_one "$c"; done
  for f in $FIGURES; do
    for c in $PROXIES; do ALL[$c,$f]+=" ${R[$c,$f]}"; done
    ALL[ratio,$f]+=" $(calc "${R[budget,$f]} / max(1e-9, ${R[plain,$f]})" 3)"
    ALL[noise,$f]+=" $(calc "${R[again,$f]} / max(1e-9, ${R[plain,$f]})" 3)"
  done
done
# shellcheck disable=SC2086  # the lists are space-separated on purpose
for f in $FIGURES; do for c in $PROXIES ratio noise; do R[$c,$f]=$(median 3 ${ALL[$c,$f]}); done; done
SENT=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sent'].get('$ORIGIN:9', 0))" "$WORK/budget/egress.log.budgets" 2>/dev/null || echo "?")

echo
echo "Machine: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r); run $(date -u +%Y-%m-%dT%H:%MZ)"
echo "Load average (1 min) at start: $LOAD_START, at end: $(cut -d' ' -f1 /proc/loadavg); $ROUNDS rounds, each figure the median of its rounds"
echo "Bytes the budgeted proxy counted to $ORIGIN:9 (its budget state file): $SENT"
echo
echo "| figure | no budget | budget on every destination | budget / no budget | the same proxy again | again / no budget (noise) |"
echo "|---|---|---|---|---|---|"
row() { echo "| $1 | ${R[plain,$2]} | ${R[budget,$2]} | ${R[ratio,$2]} | ${R[again,$2]} | ${R[noise,$2]} |"; }
row "upload through CONNECT, MB/s (median of $TRANSFERS x 100 MiB)" up
row "proxy CPU per MiB uploaded, us" cpu_up
row "download through CONNECT, MB/s (median of $TRANSFERS x 100 MiB)" dl
row "proxy CPU per MiB downloaded, us" cpu_dl
row "connect+CONNECT+1 KiB GET+close, c=32, per s" rate
row "proxy CPU per connection, us" cpu_conn
