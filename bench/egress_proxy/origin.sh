# Sourced by the egress proxy benches (run.sh, accounting_cost.sh, intercept.sh) as
# `. origin.sh NAME V`: the origin in a network namespace (ag11NAME<pid>, veth
# ag11V<pid>), the scratch directory WORK, the pids to end (PIDS), all removed
# on exit, and the small helpers they read their figures with; ORIGIN, the
# origin's address (an ordinary one: agentctl's policy refuses the
# documentation ranges as never-routable), routed to the namespace for the run only.
ORIGIN=192.0.3.2
WORK=$(mktemp -d "/tmp/agentctl-$1.XXXXXX")
chmod 755 "$WORK"
NS=ag11$1$$
VETH=ag11$2$$
PIDS=()
trap stop_origin EXIT INT TERM

# The namespace and veth pair, nginx serving /1k and /100m at $ORIGIN:80
# (keep-alive), its pid added to PIDS.
start_origin() {
  ip netns add "$NS"
  ip link add "${VETH}a" type veth peer name "${VETH}b"
  ip link set "${VETH}b" netns "$NS"
  ip addr add 192.0.3.1/24 dev "${VETH}a"
  ip link set "${VETH}a" up
  ip netns exec "$NS" ip link set lo up
  ip netns exec "$NS" ip addr add "$ORIGIN/24" dev "${VETH}b"
  ip netns exec "$NS" ip link set "${VETH}b" up
  mkdir -p "$WORK/www"
  head -c 1024 /dev/urandom > "$WORK/www/1k"
  head -c $((100 * 1024 * 1024)) /dev/urandom > "$WORK/www/100m"
  chmod 644 "$WORK/www/"*
  chmod 755 "$WORK/www"
  cat > "$WORK/nginx.conf" <<NGINX
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 8192; }
http {
  access_log off;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_requests 10000000; keepalive_timeout 600;
  server { listen $ORIGIN:80 backlog=4096; root $WORK/www; location / { } }
}
NGINX
  ip netns exec "$NS" nginx -c "$WORK/nginx.conf" -g 'daemon off;' & PIDS+=($!)
}

# Kills what PIDS holds and whatever runs in the namespace, removes it, the veth pair and WORK.
stop_origin() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.3
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  ip netns pids "$NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  ip link del "${VETH}a" 2>/dev/null || true
  rm -rf "$WORK"
}

wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/"$1"/"$2") 2>/dev/null && return 0; sleep 0.05; done; echo "bench: $1:$2 did not come up" >&2; exit 1; }
# CPU time of a process in microseconds: the sum over its threads of the
# scheduler's nanosecond count (/proc/PID/task/TID/schedstat), not utime+stime,
# whose 10 ms tick hides differences of a few percent in a run of seconds.
cpu_us() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ns += $1} END {printf "%.0f\n", ns / 1000}'; }
json() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
calc() { python3 -c "print(round($1, ${2:-2}))"; }
median() {  # DIGITS VALUE...: the median, an integer when every value is one
  python3 -c "import statistics,sys; v=sys.argv[2:]; m=statistics.median(float(x) for x in v)
print(int(m) if all(x.lstrip('-').isdigit() for x in v) and m == int(m) else round(m, int(sys.argv[1])))" "$@"
}
