# Shared by the Incus integration suites: the header every suite starts with,
# the checks it makes before it runs (exit 77 = skipped, with the reason), the
# ok/FAIL bookkeeping, the agentctl wrapper, and the "public" test hosts in a
# network namespace.
# Source it, then either call suite_start or set AGENTCTL and IMAGE.

skip() { echo "SKIP: $*"; exit 77; }

# suite_start "$@": the header of a suite run as SUITE.sh AGENTCTL_BINARY. Sets
# AGENTCTL, IMAGE, TAG (this run's pid, in every name the suite makes) and WORK
# (a scratch directory /tmp/agentctl-incus-SUITE.*, for the suite's cleanup to
# remove), and points HOME and the XDG config and state directories into WORK.
suite_start() {
  local suite
  suite=$(basename "$0" .sh)
  AGENTCTL=${1:?usage: $suite.sh AGENTCTL_BINARY}
  IMAGE=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
  TAG=$$
  WORK=$(mktemp -d "/tmp/agentctl-incus-$suite.XXXXXX")
  export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config XDG_STATE_HOME=$WORK/home/.local/state
  mkdir -p "$HOME"
}

# test_namespace PREFIX OCTET: the names of the suite's network namespace for
# start_public_hosts: NS (PREFIX n TAG), its veth pair VETH_HOST and VETH_NS,
# and NET, a /24 in 11.OCTET.0.0/16 routed to the namespace only.
# remove_leftover_namespaces "${PREFIX}n" PREFIX finds a killed run's.
test_namespace() {
  NS=$1n$TAG
  VETH_HOST=$1${TAG}h
  VETH_NS=$1${TAG}n
  NET=11.$2.$((TAG % 250 + 1))
}

# config_set KEY=VALUE: agentctl's setting for this suite (in its HOME); the
# suite stops when it cannot be set.
config_set() { "$AGENTCTL" config set "$1" >/dev/null || { echo "cannot set ${1%%=*}"; exit 1; }; }

# json_field EXPR: EXPR (Python, over the JSON d read from stdin), printed.
json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# require_incus WHY_ROOT: root, the incus client, a reachable daemon and the image.
require_incus() {
  [ "$(id -u)" = 0 ] || skip "needs root ($1)"
  command -v incus >/dev/null 2>&1 || skip "the incus client is not installed (scripts/incus/up.sh)"
  incus admin waitready --timeout=3 >/dev/null 2>&1 || skip "no Incus daemon is reachable (start one: scripts/incus/up.sh)"
  incus image alias list -f csv | cut -d, -f1 | grep -qx "$IMAGE" ||
    skip "image $IMAGE is missing (scripts/incus/up.sh builds it)"
}

PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
# Every agentctl the suites run: against the local daemon, or with
# AGENTCTL_REMOTE set (remote.sh) against that Incus remote over HTTPS: the
# same tests, the other transport. Exported, so `bash -c "agentctl ..."` works.
agentctl() { "$AGENTCTL" --provider incus ${AGENTCTL_REMOTE:+--remote "$AGENTCTL_REMOTE"} "$@"; }
export AGENTCTL AGENTCTL_REMOTE
export -f agentctl

# host_name NAME: what the host calls instance NAME (its directory under
# /var/lib/incus/containers, its cgroup lxc.payload.*): Incus prefixes the
# project, except for the default project.
host_name() {
  local project=${INCUS_PROJECT:-default}
  if [ "$project" = default ]; then echo "$1"; else echo "${project}_$1"; fi
}

# wait_until SECONDS CMD...: waits for the event CMD tests (polled every 50 ms),
# at most SECONDS (a deadline for a machine under load, not a duration the
# test relies on); returns 1 when the event never came.
wait_until() {
  local deadline=$(($(date +%s) + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

# established NS PORT: how many established connections the server on PORT in
# the test namespace NS holds. more_established NS PORT N: more than N. A
# connection a sandbox holds open is seen from the server's side.
established() { ip netns exec "$1" ss -Htn state established "( sport = :$2 )" | wc -l; }
more_established() { [ "$(established "$1" "$2")" -gt "$3" ]; }

# tcp_outcome RUN... HOST PORT: a TCP connection to HOST:PORT opened by a
# shell that the command prefix RUN starts (`agentctl exec NAME --`, a
# function like in_a): connected | refused (rejected or unreachable at once) |
# timeout (no answer within 4 s: the packets were dropped).
tcp_outcome() {
  local host=${*: -2:1} port=${*: -1}
  "${@:1:$#-2}" bash -c "timeout 4 bash -c 'exec 3<>/dev/tcp/$host/$port' 2>/dev/null; r=\$?; \
    if [ \$r = 0 ]; then echo connected; elif [ \$r = 124 ]; then echo timeout; else echo refused; fi"
}

# refused_at_once CMD...: CMD runs a curl in a sandbox (agentctl exec passes its
# exit code through) to a destination the sandbox's firewall must reject: curl
# exits 7 (could not connect: refused or unreachable at once), not 28 (its -m
# deadline passed: the packets were dropped) nor 0 (it got through). How long
# the exec itself takes on a loaded machine does not matter.
refused_at_once() {
  local rc=0
  "$@" >/dev/null 2>&1 || rc=$?
  [ "$rc" = 7 ]
}

# The last line of a suite: the tally, and its exit status.
finish() {
  echo "# $PASS passed, $FAIL failed"
  [ "$FAIL" = 0 ]
}

# HOLD_CONNECTION_PY HOST PORT [TARGET [until-open]]: opens a TCP connection to
# HOST:PORT (with TARGET, a CONNECT tunnel to TARGET through the proxy there)
# and prints "connected" (or "open STATUS-LINE"), then pings it every half
# second and prints "cut" as soon as it is closed (else "alive" after 60 s, a
# deadline). With until-open it prints "asking" and asks again every 100 ms
# until the proxy answers 200 (for 60 s at most): a grant given once the guest
# asks is used at once, however long the exec took to start. Run it in a
# sandbox, in the background, while the policy changes.
HOLD_CONNECTION_PY='
import socket, sys, time
def tunnel():
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[3].encode(), sys.argv[3].encode()))
    head = b""
    while b"\r\n\r\n" not in head:
        byte = s.recv(1)
        if not byte: break
        head += byte
    return s, head.split(b"\r\n")[0].decode()
if len(sys.argv) > 3:
    s, status = tunnel()
    if len(sys.argv) > 4:
        print("asking", flush=True)
        deadline = time.time() + 60
        while status.split()[1:2] != ["200"] and time.time() < deadline:
            s.close(); time.sleep(0.1); s, status = tunnel()
    print("open", status, flush=True)
else:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print("connected", flush=True)
deadline = time.time() + 60
while time.time() < deadline:
    try:
        s.sendall(b"ping\n"); s.settimeout(2)
        if s.recv(16) == b"": print("cut", flush=True); break
    except OSError as e:
        print("cut", e, flush=True); break
    time.sleep(0.5)
else:
    print("alive", flush=True)'

# ---------------------------------------------------------------- "public" test hosts
# The servers every test host runs: HTTP on 8080 (answers "hello from ADDR
# HOST"), a line echo on 8081, an SSH banner on 8022, a TCP banner on 53 and a
# UDP DNS echo on 53.
PUBLIC_SERVERS_PY='
import http.server, socket, socketserver, sys, threading, time
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from %s %s\n" % (self.server.server_address[0], self.headers.get("Host"))).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(line)
class Banner(socketserver.StreamRequestHandler):
    def handle(self):
        self.wfile.write(b"SSH-2.0-agentctl-test\r\n")
class T(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True; daemon_threads = True
class H(http.server.ThreadingHTTPServer):
    def server_bind(self):  # skips the reverse DNS lookup of HTTPServer, which can block for seconds here
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "test", self.server_address[1]
for addr in sys.argv[1:]:
    for port, handler in ((8080, Hello), (8081, Echo), (8022, Banner), (53, Banner)):
        server = (H if handler is Hello else T)((addr, port), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
def udp53(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, 53))
    while True:
        data, peer = s.recvfrom(512); s.sendto(data[:2] + b"\x81\x80" + data[4:], peer)
for addr in sys.argv[1:]:
    threading.Thread(target=udp53, args=(addr,), daemon=True).start()
time.sleep(900)
'

# remove_leftover_namespaces NS_PREFIX VETH_PREFIX: a suite killed part-way
# leaves its namespace (NS_PREFIX + its pid) and the host end of its veth pair
# (VETH_PREFIX + that pid + "h") holding its test subnet, and the next run
# would refuse to send traffic there. The ones whose suite is gone are this
# suite's own leftovers: their processes are stopped and they are removed.
remove_leftover_namespaces() {
  local ns pid
  for ns in $(ip netns list | awk '{print $1}'); do
    pid=${ns#"$1"}
    [[ "$ns" != "$pid" && "$pid" =~ ^[0-9]+$ ]] || continue
    kill -0 "$pid" 2>/dev/null && continue  # its suite still runs
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$ns" 2>/dev/null
    ip link del "$2${pid}h" 2>/dev/null
    echo "# removed $ns, left by a run of this suite that was killed (pid $pid)"
  done
}

# make_test_namespace NS VETH_HOST VETH_NS NET ADDR...: a network namespace NS
# behind a veth pair, NET.1/24 on the host side and every ADDR (in NET) inside.
# Every ADDR must be routed to the veth (checked with `ip route get` before any
# traffic). Returns 1 with a message when it cannot; stop_public_hosts removes it.
make_test_namespace() {
  local ns=$1 veth_host=$2 veth_ns=$3 net=$4 addr
  shift 4
  ip netns add "$ns" || { echo "cannot create a network namespace"; return 1; }
  ip link add "$veth_host" type veth peer name "$veth_ns"
  ip link set "$veth_ns" netns "$ns"
  ip addr add "$net.1/24" dev "$veth_host"
  ip link set "$veth_host" up
  ip -n "$ns" link set lo up
  for addr in "$@"; do ip -n "$ns" addr add "$addr/24" dev "$veth_ns"; done
  ip -n "$ns" link set "$veth_ns" up
  ip -n "$ns" route add default via "$net.1"
  for addr in "$@"; do
    ip route get "$addr" | grep -q "dev $veth_host" || { echo "refusing to run: $addr is not routed to the test namespace"; return 1; }
  done
}

# start_public_hosts NS VETH_HOST VETH_NS NET ADDR...: make_test_namespace, with
# every ADDR running the servers above. Sets PUBLIC_PID (the servers' process);
# waits until every listener answers. Returns 1 with a message when it cannot.
start_public_hosts() {
  local ns=$1 addr dst port
  make_test_namespace "$@" || return 1
  shift 4
  ip netns exec "$ns" python3 -c "$PUBLIC_SERVERS_PY" "$@" &
  PUBLIC_PID=$!
  for addr in "$@"; do
    for port in 8080 8081 53; do
      dst=$addr/$port
      for _ in $(seq 100); do bash -c "exec 3<>/dev/tcp/$dst" 2>/dev/null && break; sleep 0.1; done
    done
  done
}

# stop_public_hosts NS VETH_HOST: removes what start_public_hosts (or
# make_test_namespace) made.
stop_public_hosts() {
  [ -n "${PUBLIC_PID:-}" ] && kill "$PUBLIC_PID" 2>/dev/null
  ip netns del "$1" 2>/dev/null
  ip link del "$2" 2>/dev/null
}

# leftovers_of NAME: prints what agentctl made for sandbox NAME and is still
# there (the instance, a bridge or network ACL recording NAME as its sandbox,
# an nft table of such a bridge, the cgroup directories of its host processes
# (host_cgroup.hpp: agentctl/BRIDGE under the memory and pids hierarchies, or
# the unified one), the state directory, a resolver or proxy process whose
# command line names the sandbox's state); nothing when all of it is gone.
# Uses $XDG_STATE_HOME (the suites set it).
leftovers_of() {
  local name=$1 state=${XDG_STATE_HOME:-$HOME/.local/state}/agentctl/incus/$1
  incus info "$name" >/dev/null 2>&1 && echo "instance $name"
  incus network list --project default -f json 2>/dev/null | python3 -c '
import json, sys
for n in json.load(sys.stdin):
    if n.get("config", {}).get("user.agentctl.sandbox") == sys.argv[1]: print("bridge", n["name"])' "$name"
  incus network acl list --project default -f json 2>/dev/null | python3 -c '
import json, sys
for a in json.load(sys.stdin):
    if a.get("config", {}).get("user.agentctl.sandbox") == sys.argv[1]: print("network ACL", a["name"])' "$name"
  local bridge  # the name agentctl gives the bridge (naming.cpp: bridge_name), for its nft table
  bridge=$(python3 -c '
import sys
h = 0xcbf29ce484222325
for b in sys.argv[1].encode(): h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
print("%011x" % (h & 0xfffffffffff))' "$name")
  nft list tables 2>/dev/null | grep -F -- "$bridge" | sed 's/^/nft /'
  local cgroup
  for cgroup in /sys/fs/cgroup/{memory/,pids/,}agentctl/agc-"$bridge"; do
    [ -d "$cgroup" ] && echo "cgroup $cgroup"
  done
  [ -e "$state" ] && echo "state directory $state"
  { pgrep -af -- "$state/"; pgrep -af -- "egress-proxy .*--sandbox $name( |\$)"; } | sed 's/^/process /'
  return 0
}
