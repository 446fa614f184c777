#!/usr/bin/env bash
# Benchmarks agentctl's egress proxy against direct access, squid and tinyproxy
# in one run, beside the floor relay (bench/egress_proxy/floor_relay.cpp): a
# relay that does nothing but relay, which shows what any proxy can reach on
# the machine at hand. All proxies get the same allowlist (the origin's address,
# ports 80 and 5201) and talk to the same origin: nginx (keep-alive; a 1 KiB
# and a 100 MiB file) and an iperf3 server in a network namespace this script
# creates. The proxies listen on loopback. Prints a Markdown table.
#
#   sudo bench/egress_proxy/run.sh [BUILD_DIR]    (default: build-release, built if needed)
#
# The contenders take turns, ROUNDS times (default 3): each figure is the
# median of its rounds, and each ratio the median of the rounds' ratios, so a
# load that comes and goes on a shared machine falls on every contender.
# Spawn times interleave the proxies the same way (SPAWNS each). The floor
# relay has no plain HTTP, so it has no keep-alive figure.
#
# The origin address is 192.0.3.2 on a veth pair: agentctl's policy refuses the
# documentation ranges as never-routable, so the bench uses an ordinary
# address, routed to the namespace for the run only. Nothing leaves the machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-release}
SECONDS_RATE=${SECONDS_RATE:-5}
DOWNLOADS=${DOWNLOADS:-10}
IDLE_TUNNELS=${IDLE_TUNNELS:-1000}
ROUNDS=${ROUNDS:-3}
SPAWNS=${SPAWNS:-9}

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root to create the origin's network namespace" >&2; exit 1; }

# A clean clone: the build dependencies first (idempotent), then the contenders.
"$ROOT/scripts/install-deps.sh" >&2
missing=()
for tool in squid tinyproxy nginx iperf3 wrk proxychains4; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: squid tinyproxy nginx-light iperf3 wrk proxychains4" >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends \
    squid tinyproxy nginx-light iperf3 wrk proxychains4 >&2
  # Debian starts the packaged services; the bench runs its own instances.
  for service in squid tinyproxy nginx; do
    command -v systemctl >/dev/null 2>&1 && systemctl stop "$service" >/dev/null 2>&1 || true
  done
fi
export PATH=$PATH:/usr/sbin

if [ ! -x "$BUILD/src/agentctl" ] || [ ! -x "$BUILD/bench/proxy_bench" ] || [ ! -x "$BUILD/bench/floor_relay" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAGENTCTL_BENCH=ON -DAGENTCTL_TESTS=OFF \
    -DAGENTCTL_WERROR=OFF >&2  # g++ 12 -O3 reports a false -Wrestrict in core/files.cpp
  ninja -C "$BUILD" agentctl proxy_bench floor_relay >&2
fi
AGENTCTL=$BUILD/src/agentctl
PB=$BUILD/bench/proxy_bench
FLOOR=$BUILD/bench/floor_relay
PROXIES="floor agentctl squid tinyproxy"  # the order in which they take their turns

. "$ROOT/bench/egress_proxy/origin.sh" bench b

# ---------------------------------------------------------------- origin
start_origin
ip netns exec "$NS" iperf3 -s -B "$ORIGIN" -p 5201 >/dev/null 2>&1 & PIDS+=($!)

# ---------------------------------------------------------------- contenders
# Below the ephemeral port range (32768-60999), so no client socket of the run can hold them.
declare -A PORT=([agentctl]=18101 [squid]=18102 [tinyproxy]=18103 [floor]=18104) PID  # PID: as each starts
mkdir -p "$WORK/bench1"
cat > "$WORK/bench1/egress-policy.json" <<JSON
{"version":1,"enabled":true,"denyLAN":true,"allowLAN":false,
 "allow":[{"domain":"$ORIGIN","ports":[80,5201],"origin":"bench"}],"dns":{"servers":[],"disabled":false}}
JSON

squid_conf() {  # port file
  cat > "$2" <<SQUID
http_port 127.0.0.1:$1
pid_filename $WORK/squid-$1.pid
cache_log $WORK/squid-$1.log
access_log none
cache deny all
cache_mem 8 MB
acl dest dst $ORIGIN
acl bench_ports port 80 5201
http_access deny !bench_ports
http_access allow dest
http_access deny all
coredump_dir $WORK
shutdown_lifetime 0 seconds
visible_hostname bench
SQUID
}
tiny_conf() {  # port file
  printf '^%s$\n' "${ORIGIN//./\\.}" > "$WORK/tinyproxy.filter"
  cat > "$2" <<TINY
User nobody
Group nogroup
Port $1
Listen 127.0.0.1
Timeout 600
MaxClients 4000
Allow 127.0.0.1
ConnectPort 80
ConnectPort 5201
Filter "$WORK/tinyproxy.filter"
FilterDefaultDeny Yes
LogLevel Critical
TINY
}
chmod 777 "$WORK"
squid_conf ${PORT[squid]} "$WORK/squid.conf"
tiny_conf ${PORT[tinyproxy]} "$WORK/tinyproxy.conf"

# --max-tunnels: the idle-tunnel figure opens more than a sandbox's default cap (256).
"$AGENTCTL" egress-proxy --listen 127.0.0.1:${PORT[agentctl]} --policy "$WORK/bench1/egress-policy.json" \
  --max-tunnels $((IDLE_TUNNELS + 64)) --log "$WORK/agentctl.log" >/dev/null 2>"$WORK/agentctl.err" & PID[agentctl]=$!
squid -N -f "$WORK/squid.conf" >/dev/null 2>&1 & PID[squid]=$!
tinyproxy -d -c "$WORK/tinyproxy.conf" >/dev/null 2>&1 & PID[tinyproxy]=$!
PIDS+=("${PID[@]}")

wait_port "$ORIGIN" 80; wait_port 127.0.0.1 ${PORT[agentctl]}; wait_port 127.0.0.1 ${PORT[squid]}; wait_port 127.0.0.1 ${PORT[tinyproxy]}
# The floor relay runs as many event loops as agentctl's proxy reports in its
# start line (written within the log's flush interval of listening).
FLOOR_LOOPS=""
for _ in $(seq 1 100); do
  FLOOR_LOOPS=$(python3 -c "import json,sys
print(next((e['event_loops'] for e in map(json.loads, open(sys.argv[1])) if e.get('event') == 'start'), ''))" \
    "$WORK/agentctl.log" 2>/dev/null) || true  # a batch may be half written
  [ -n "$FLOOR_LOOPS" ] && break
  sleep 0.05
done
[ -n "$FLOOR_LOOPS" ] || { echo "run.sh: agentctl's proxy logged no start line in $WORK/agentctl.log" >&2; exit 1; }
"$FLOOR" --listen 127.0.0.1:${PORT[floor]} --loops "$FLOOR_LOOPS" >/dev/null 2>&1 & PID[floor]=$!; PIDS+=("${PID[floor]}")
wait_port 127.0.0.1 ${PORT[floor]}
sleep 1

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

declare -A R
LOAD_START=$(cut -d' ' -f1 /proc/loadavg)
for c in $PROXIES; do R[$c,rss_idle]=$(rss_kib "${PID[$c]}"); done

iperf3_gbps() {  # [PROXY_PORT]: Gbit/s received in a 5 s run to the origin, or "failed: WHY"
  # Through a proxy, proxychains4 (proxychains-ng) makes iperf3's own
  # connect(2) open a CONNECT tunnel, so nothing but the proxy stands between
  # iperf3 and the origin (runs 6-11 put a relay of the bench's own in between).
  local via=()
  if [ -n "${1:-}" ]; then
    printf 'strict_chain\nquiet_mode\ntcp_read_time_out 15000\ntcp_connect_time_out 8000\n[ProxyList]\nhttp 127.0.0.1 %s\n' \
      "$1" > "$WORK/proxychains-$1.conf"
    via=(proxychains4 -q -f "$WORK/proxychains-$1.conf")
  fi
  python3 -c "import json,sys
d = json.loads(sys.argv[1])
print(round(d['end']['sum_received']['bits_per_second']/1e9, 2) if 'sum_received' in d.get('end', {}) else 'failed: ' + d.get('error', '?'))" \
    "$("${via[@]}" iperf3 -c "$ORIGIN" -p 5201 -t 5 -J 2>/dev/null)"
}

run_contender() {  # name via pid
  local c=$1 via=$2 pid=$3 before after out port=""
  [ "$via" = direct ] || port=${via##*:}
  echo "== $c" >&2
  # 100 MiB through CONNECT (direct: same GETs without a proxy), repeated.
  before=$( [ -n "$pid" ] && cpu_us "$pid" || echo 0)
  out=$("$PB" download --via "$via" --target "$ORIGIN:80" --path /100m --repeat "$DOWNLOADS")
  after=$( [ -n "$pid" ] && cpu_us "$pid" || echo 0)
  R[$c,dl]=$(json "$out" median_MBps)
  R[$c,cpu_mb]=$(calc "($after - $before) / ($(json "$out" bytes) / 1048576)" 1)
  # iperf3, through a CONNECT tunnel for the proxies.
  R[$c,iperf]=$(iperf3_gbps "$port")
  sleep 1  # let the iperf3 server finish the test before the next one
  # New connection + CONNECT + 1 KiB GET + close, 32 at a time.
  before=$( [ -n "$pid" ] && cpu_us "$pid" || echo 0)
  out=$("$PB" rate --via "$via" --target "$ORIGIN:80" --path /1k --concurrency 32 --seconds "$SECONDS_RATE")
  after=$( [ -n "$pid" ] && cpu_us "$pid" || echo 0)
  R[$c,rate32]=$(json "$out" rate); R[$c,p50_32]=$(json "$out" p50_us); R[$c,p99_32]=$(json "$out" p99_us)
  R[$c,fail32]=$(json "$out" failures)
  R[$c,cpu_conn]=$(calc "($after - $before) / max(1, $(json "$out" requests))" 1)
  # The same, one at a time: added latency.
  out=$("$PB" rate --via "$via" --target "$ORIGIN:80" --path /1k --concurrency 1 --seconds "$SECONDS_RATE")
  R[$c,p50_1]=$(json "$out" p50_us); R[$c,p99_1]=$(json "$out" p99_us)
  # Plain HTTP keep-alive through the proxy (absolute-form requests); the
  # floor relay has no plain HTTP.
  R[$c,wrk]=""; R[$c,wrk_err]=""
  if [ "$c" != floor ]; then
    if [ "$via" = direct ]; then
      out=$(wrk -t 2 -c 32 -d "${SECONDS_RATE}s" "http://$ORIGIN/1k")
    else
      printf 'wrk.path = "http://%s/1k"\nwrk.headers["Host"] = "%s"\n' "$ORIGIN" "$ORIGIN" > "$WORK/abs.lua"
      out=$(wrk -t 2 -c 32 -d "${SECONDS_RATE}s" -s "$WORK/abs.lua" "http://$via")
    fi
    R[$c,wrk]=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    R[$c,wrk_err]=$(echo "$out" | awk '/Non-2xx|Socket errors/ {printf "%s ", $0}')
  fi
  # Memory with idle tunnels (first round only: later rounds reuse what the
  # first one's tunnels left allocated, and would read as 0).
  if [ -n "$pid" ] && [ "$round" = 1 ]; then
    local before_rss; before_rss=$(rss_kib "$pid")
    coproc IDLE { "$PB" idle --via "$via" --target "$ORIGIN:80" --count "$IDLE_TUNNELS"; }
    read -r line <&"${IDLE[0]}"
    sleep 0.5
    R[$c,rss_tunnels]=$(rss_kib "$pid")
    R[$c,rss_per]=$(calc "(${R[$c,rss_tunnels]} - $before_rss) / $IDLE_TUNNELS" 1)
    eval "exec ${IDLE[1]}>&-"
    wait "$IDLE_PID" 2>/dev/null || true
  fi
}

# Figures kept per round (text, such as wrk's error line, is the last round's;
# memory is measured in the first round only).
FIGURES="dl cpu_mb iperf rate32 p50_32 p99_32 fail32 cpu_conn p50_1 p99_1 wrk"
declare -A ALL
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round of $ROUNDS" >&2
  run_contender direct direct ""
  for c in $PROXIES; do run_contender "$c" "127.0.0.1:${PORT[$c]}" "${PID[$c]}"; done
  for c in direct $PROXIES; do
    for f in $FIGURES; do [[ ${R[$c,$f]:-} =~ ^-?[0-9.]+$ ]] && ALL[$c,$f]+=" ${R[$c,$f]}"; done
    [ "$c" = direct ] && continue
    ALL[$c,dl_ratio]+=" $(calc "${R[$c,dl]} / ${R[direct,dl]}" 3)"
    case ${R[$c,iperf]} in failed*) ;; *)
      ALL[$c,iperf_ratio]+=" $(calc "${R[$c,iperf]} / ${R[direct,iperf]}" 3)";; esac
    [ -n "${R[$c,wrk]}" ] && ALL[$c,wrk_ratio]+=" $(calc "${R[$c,wrk]} / ${R[direct,wrk]}" 3)"
    ALL[$c,added_ms]+=" $(calc "(${R[$c,p50_1]} - ${R[direct,p50_1]}) / 1000" 4)"
  done
done
for c in direct $PROXIES; do
  for f in $FIGURES dl_ratio iperf_ratio wrk_ratio added_ms; do
    # shellcheck disable=SC2086  # the list is space-separated on purpose
    [ -n "${ALL[$c,$f]:-}" ] && R[$c,$f]=$(median 3 ${ALL[$c,$f]})
  done
done
R[direct,cpu_mb]=0; R[direct,cpu_conn]=0

# Spawn to listening, on fresh ports, the proxies in turn.
squid_conf 18112 "$WORK/squid-spawn.conf"; tiny_conf 18113 "$WORK/tiny-spawn.conf"
spawn_ms() { json "$("$PB" spawn --port "$1" -- "${@:2}")" listening_ms; }
declare -A SPAWN
for _ in $(seq 1 "$SPAWNS"); do
  SPAWN[floor]+=" $(spawn_ms 18114 "$FLOOR" --listen 127.0.0.1:18114)"; sleep 0.3
  SPAWN[agentctl]+=" $(spawn_ms 18111 "$AGENTCTL" egress-proxy --listen 127.0.0.1:18111 --policy "$WORK/bench1/egress-policy.json" --log "$WORK/spawn.log")"; sleep 0.3
  SPAWN[squid]+=" $(spawn_ms 18112 squid -N -f "$WORK/squid-spawn.conf")"; sleep 0.3
  SPAWN[tinyproxy]+=" $(spawn_ms 18113 tinyproxy -d -c "$WORK/tiny-spawn.conf")"; sleep 0.3
done
for c in $PROXIES; do
  # shellcheck disable=SC2086
  R[$c,spawn]=$(python3 -c "import sys; print(round(min(float(x) for x in sys.argv[1:]), 2))" ${SPAWN[$c]})
  # shellcheck disable=SC2086
  R[$c,spawn_median]=$(median 2 ${SPAWN[$c]})
done

echo
echo "Machine: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r); $(squid -v | head -1); $(tinyproxy -v 2>&1 | head -1); run $(date -u +%Y-%m-%dT%H:%MZ)"
# Throughput depends on these (docs/benchmarks-history.md, "Eighth pass"): BBR without
# the fq qdisc makes the kernel pace each connection itself.
echo "TCP congestion control (host default): $(cat /proc/sys/net/ipv4/tcp_congestion_control); default qdisc: $(cat /proc/sys/net/core/default_qdisc)"
echo "Load average (1 min) at start: $LOAD_START, at end: $(cut -d' ' -f1 /proc/loadavg); $ROUNDS rounds, each figure the median of its rounds"
echo
echo "| figure | direct | floor relay | agentctl | squid | tinyproxy |"
echo "|---|---|---|---|---|---|"
row() { echo "| $1 | ${R[direct,$2]:--} | ${R[floor,$2]:--} | ${R[agentctl,$2]:--} | ${R[squid,$2]:--} | ${R[tinyproxy,$2]:--} |"; }
row "100 MiB download, MB/s (median of $DOWNLOADS GETs)" dl
row "  ratio to direct" dl_ratio
row "proxy CPU per MiB moved, us" cpu_mb
row "iperf3 through CONNECT, Gbit/s" iperf
row "  ratio to direct" iperf_ratio
row "connect+CONNECT+1 KiB GET+close, c=32, per s" rate32
row "  p50 latency, us" p50_32
row "  p99 latency, us" p99_32
row "  failures" fail32
row "proxy CPU per connection, us" cpu_conn
row "c=1 p50 latency, us" p50_1
row "  added latency vs direct, ms" added_ms
row "plain HTTP keep-alive (wrk -c32), req/s" wrk
row "  ratio to direct" wrk_ratio
row "  wrk errors" wrk_err
row "RSS idle, KiB" rss_idle
row "RSS with $IDLE_TUNNELS idle tunnels, KiB" rss_tunnels
row "  per idle tunnel, KiB" rss_per
row "spawn to listening, ms (best of $SPAWNS)" spawn
row "spawn to listening, ms (median of $SPAWNS)" spawn_median
