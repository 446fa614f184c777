#!/usr/bin/env bash
# The host processes suite: each Incus sandbox's egress proxy and resolver run
# on the host as a uid of its own, the proxy not dumpable, both in a cgroup of
# their own with limits, and agentctl trusts and signals only the processes it
# started. Replays, against the real daemon (containers), what a process
# running as one sandbox's proxy uid (or as nobody) would try on another
# sandbox's: read its policy and log (also through /proc/PID/cwd), trace or
# signal its proxy and resolver, overwrite its files, take its address; an
# impostor on a sandbox's proxy address and pid file; tunnels to a sink that
# never reads (socket memory charged to, and bounded by, the sandbox's
# cgroup); a delete run with another state directory.
#
# The one destination is on this machine: a sink in a network namespace the
# suite creates, routed only there (checked with `ip route get`).
#
# Usage: host_processes.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
A=itest-hp-a-$TAG
B=itest-hp-b-$TAG
C=itest-hp-c-$TAG
test_namespace ag26 226
SINK=$NET.2
SINK_PORT=9000
require_incus "processes as other users, cgroups, network namespaces, the Incus admin socket"
command -v setpriv >/dev/null 2>&1 || skip "setpriv (util-linux) is needed to act as another user"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test's processes"
# The test's processes as other users run the system's python (a python3 on
# root's PATH may live where they cannot reach it).
PY=/usr/bin/python3
[ -x "$PY" ] || skip "$PY is needed for the test's processes as other users"

IMPOSTOR=
SINK_PID=
cleanup() {
  set +e
  [ -n "$IMPOSTOR" ] && kill "$IMPOSTOR" 2>/dev/null
  [ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null
  for n in "$A" "$B" "$C"; do "$AGENTCTL" --provider incus delete --force "$n" >/dev/null 2>&1; done
  stop_public_hosts "$NS" "$VETH_HOST"
  rm -rf "$WORK"
}
trap cleanup EXIT

# status_pid NAME LINE: the pid status shows on line LINE ("Egress proxy", "Resolver").
status_pid() { agentctl status "$1" -o json | json_field "d['extra']['$2'].split('pid ')[1].split(',')[0]"; }
# as ID CMD...: CMD as uid and gid ID, without supplementary groups or capabilities.
as() { local id=$1; shift; setpriv --reuid="$id" --regid="$id" --clear-groups --inh-caps=-all "$@"; }
denied() { ! as "$@" >/dev/null 2>&1; }
allowed() { as "$@" >/dev/null 2>&1; }
uid_of() { awk '/^Uid:/ {print $2}' "/proc/$1/status"; }
listening() { bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }
# Nothing on this machine listens on ADDRESS:PORT (the address may be gone).
no_listener() { ! ss -Htln "sport = :$2" | awk '{print $4}' | grep -qx "$1:$2"; }
# started PID: the process's start time (field 22 of /proc/PID/stat).
started() { sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20; }
# gone PID STARTED: no such process (or another one now has its pid), or only
# its exit status is left (a zombie); prints what is there when it is not gone.
gone() {
  [ ! -e "/proc/$1" ] || [ "$(started "$1" 2>/dev/null)" != "$2" ] ||
    grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null ||
    { echo "# pid $1 is still there:"; grep -E '^(Name|State|Threads):' "/proc/$1/status" | sed 's/^/#   /'; false; }
}
# The state directory made traversable for everyone, so that only the modes
# agentctl sets protect a sandbox's files (agentctl makes it private again
# whenever it runs).
open_state_dir() {
  local d=$WORK part
  chmod o+x "$d"
  for part in home .local state agentctl incus; do d=$d/$part; chmod o+x "$d"; done
}
# PTRACE_ATTACH to argv[1]; exits 1 when the kernel refuses (detaches again when it does not).
PTRACE_PY='
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
if libc.ptrace(16, pid, 0, 0) != 0:
    sys.exit(1)
os.waitpid(pid, 0x40000000)
libc.ptrace(17, pid, 0, 0)'

config_set incus.subnetPool=10.226.0.0/16
echo "$SINK sink.test" >"$WORK/hosts"
config_set "incus.proxyResolveFile=$WORK/hosts"

# A sink that accepts and never reads.
remove_leftover_namespaces ag26n ag26
start_public_hosts "$NS" "$VETH_HOST" "$VETH_NS" "$NET" "$SINK" || exit 1
ip netns exec "$NS" python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(512)
held = []
while True:
    held.append(s.accept()[0])' "$SINK" "$SINK_PORT" &
SINK_PID=$!
wait_until 30 listening "$SINK" "$SINK_PORT" || { echo "the sink did not come up"; exit 1; }

# ---------------------------------------------------------------- two sandboxes, each with its own uid
create() {
  # A variable of the shell that ran agentctl (a token, say) must not reach the sandbox's processes.
  AGENTCTL_TEST_SHELL_TOKEN=shell-token-$$ agentctl create "$1" --image "$IMAGE" --isolation container --mount-none --allow "sink.test:$SINK_PORT" \
    >"$WORK/create-$1.out" 2>&1 || { cat "$WORK/create-$1.out"; bad "create $1"; finish; exit 1; }
}
create "$A"
# B with limits of its own (the settings are read when its processes start).
for setting in incus.proxyMaxTunnels=8 incus.hostSocketMemory=4MiB incus.hostMemory=200MiB incus.hostProcesses=48; do
  config_set "$setting"
done
create "$B"
ok "create $A and $B"
for setting in incus.proxyMaxTunnels=256 incus.hostSocketMemory=128MiB incus.hostMemory=256MiB incus.hostProcesses=64; do
  config_set "$setting"
done

UA=$(incus config get "$A" user.agentctl.host.uid)
UB=$(incus config get "$B" user.agentctl.host.uid)
SA=$(incus config get "$A" user.agentctl.host.state)
SB=$(incus config get "$B" user.agentctl.host.state)
BR_A=$(incus config get "$A" user.agentctl.bridge)
BR_B=$(incus config get "$B" user.agentctl.bridge)
GW_A=$(incus network get "$BR_A" ipv4.address | cut -d/ -f1)
GW_B=$(incus network get "$BR_B" ipv4.address | cut -d/ -f1)
PA=$(status_pid "$A" "Egress proxy")
RA=$(status_pid "$A" Resolver)
PB=$(status_pid "$B" "Egress proxy")
RB=$(status_pid "$B" Resolver)
PB_STARTED=$(started "$PB") RB_STARTED=$(started "$RB")
check "each sandbox has a uid of its own, in agentctl's range 2000000000-2000065535" python3 -c '
import sys; a, b = int(sys.argv[1]), int(sys.argv[2])
sys.exit(not (a != b and all(2000000000 <= x <= 2000065535 for x in (a, b))))' "$UA" "$UB"
check "A's uid is recorded on its bridge too" test "$(incus network get "$BR_A" user.agentctl.host.uid)" = "$UA"
check "A's host files are where the instance records" test -d "$SA/run" -a "$SA" = "$XDG_STATE_HOME/agentctl/incus/$A"
check "A's proxy runs as A's uid" test "$(uid_of "$PA")" = "$UA"
check "A's resolver runs as A's uid (never root)" test "$(uid_of "$RA")" = "$UA"
check "B's proxy and resolver run as B's uid" test "$(uid_of "$PB"):$(uid_of "$RB")" = "$UB:$UB"
check "status names the proxy's user" bash -c \
  "agentctl status '$A' | grep -Eq '^Egress proxy: .*\\(running, pid $PA, as uid $UA\\)'"
check "status names the resolver's user" bash -c \
  "agentctl status '$A' | grep -Eq '^Resolver: .*dnsmasq, pid $RA, as uid $UA\\)'"
check "A's proxy is not dumpable (its /proc files are root's)" test "$(stat -c %u "/proc/$PA/environ")" = 0
check "A's proxy and resolver carry none of the creating shell's variables" bash -c \
  "! tr '\\0' '\\n' </proc/$PA/environ | grep -q AGENTCTL_TEST_SHELL_TOKEN && \
   ! tr '\\0' '\\n' </proc/$RA/environ | grep -q AGENTCTL_TEST_SHELL_TOKEN && \
   tr '\\0' '\\n' </proc/$PA/environ | grep -q '^PATH='"
check "B's policy is root's and B's group's only (0640)" test "$(stat -c %u:%g:%a "$SB/egress-policy.json")" = "0:$UB:640"
check "B's run directory is B's uid's only (0700)" test "$(stat -c %u:%a "$SB/run")" = "$UB:700"
check "what agentctl recorded of B's proxy is root's only (0600)" test "$(stat -c %u:%a "$SB/egress-proxy.process")" = "0:600"

# ---------------------------------------------------------------- another sandbox's uid, or nobody, against B
open_state_dir
check "control: B's own uid reads B's policy" allowed "$UB" cat "$SB/egress-policy.json"
setpriv --reuid="$UA" --regid="$UA" --clear-groups sleep 300 &
SLEEPER=$!
check "control: A's uid traces a process of its own that is dumpable" allowed "$UA" "$PY" -c "$PTRACE_PY" "$SLEEPER"
check "control: A's uid reads that process's environment" allowed "$UA" cat "/proc/$SLEEPER/environ"
kill "$SLEEPER"
for who in "$UA" 65534; do
  if [ "$who" = 65534 ]; then label=nobody; else label="A's proxy uid"; fi
  check "$label cannot read B's policy" denied "$who" cat "$SB/egress-policy.json"
  check "$label cannot read B's log" denied "$who" cat "$SB/run/egress.log"
  check "$label cannot read B's log through /proc/PID/cwd" denied "$who" cat "/proc/$PB/cwd/egress.log"
  check "$label cannot read B's proxy's environment or memory" denied "$who" cat "/proc/$PB/environ"
  check "$label cannot ptrace B's proxy" denied "$who" "$PY" -c "$PTRACE_PY" "$PB"
  check "$label cannot ptrace B's resolver" denied "$who" "$PY" -c "$PTRACE_PY" "$RB"
  check "$label cannot signal B's proxy" denied "$who" kill -0 "$PB"
  check "$label cannot signal B's resolver" denied "$who" kill -0 "$RB"
  check "$label cannot rewrite B's pid file" denied "$who" sh -c "echo 1 >'$SB/run/egress-proxy.pid'"
  check "$label cannot rewrite B's policy" denied "$who" sh -c "echo {} >'$SB/egress-policy.json'"
  check "$label cannot rewrite agentctl's record of B's proxy" denied "$who" sh -c "echo {} >'$SB/egress-proxy.process'"
done
check "B's proxy still runs, as agentctl started it" bash -c \
  "agentctl status '$B' | grep -Eq '^Egress proxy: .*\\(running, pid $PB, as uid $UB\\)'"
# Not even a process of A's own uid inspects A's processes.
check "A's own uid cannot ptrace A's proxy (not dumpable)" denied "$UA" "$PY" -c "$PTRACE_PY" "$PA"
check "A's own uid cannot read A's proxy's environment" denied "$UA" cat "/proc/$PA/environ"
check "A's own uid cannot ptrace A's resolver (it holds capabilities that uid lacks)" \
  denied "$UA" "$PY" -c "$PTRACE_PY" "$RA"

# ---------------------------------------------------------------- cgroups: limits, and the processes in them
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  MEM=/sys/fs/cgroup/agentctl PIDS=/sys/fs/cgroup/agentctl
  check "A's cgroup limits its memory (256MiB, socket memory included)" test "$(cat "$MEM/$BR_A/memory.max")" = 268435456
else
  MEM=/sys/fs/cgroup/memory/agentctl PIDS=/sys/fs/cgroup/pids/agentctl
  check "A's memory cgroup limits its memory (256MiB)" test "$(cat "$MEM/$BR_A/memory.limit_in_bytes")" = 268435456
  check "A's memory cgroup limits its socket memory (128MiB)" \
    test "$(cat "$MEM/$BR_A/memory.kmem.tcp.limit_in_bytes")" = 134217728
  check "B's limits follow the settings (200MiB, 4MiB)" \
    test "$(cat "$MEM/$BR_B/memory.limit_in_bytes"):$(cat "$MEM/$BR_B/memory.kmem.tcp.limit_in_bytes")" = 209715200:4194304
fi
check "A's cgroup limits its processes (64)" test "$(cat "$PIDS/$BR_A/pids.max")" = 64
check "B's process limit follows the setting (48)" test "$(cat "$PIDS/$BR_B/pids.max")" = 48
for cg in "$MEM" "$PIDS"; do
  check "A's proxy and resolver are in ${cg#/sys/fs/cgroup/}/$BR_A" \
    bash -c "grep -qx $PA '$cg/$BR_A/cgroup.procs' && grep -qx $RA '$cg/$BR_A/cgroup.procs'"
done

# ---------------------------------------------------------------- tunnels to a sink that never reads
# Nine CONNECT tunnels from B, writing until nothing moves: the ninth is
# refused (incus.proxyMaxTunnels=8), and the proxy's socket memory is charged
# to B's cgroup, which holds it at its limit (4MiB) although the eight would
# pin about 8 MiB.
FLOOD_PY='
import socket, sys, time
gw, n, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
socks = []
for _ in range(n):
    s = socket.create_connection((gw, 3128), timeout=5)
    s.sendall(b"CONNECT sink.test:9000 HTTP/1.1\r\nHost: sink.test:9000\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    line = head.split(b"\r\n")[0].decode()
    if " 200 " in line:
        socks.append(s)
    else:
        print("refused", line, flush=True)
print("open", len(socks), flush=True)
for s in socks:
    s.setblocking(False)
chunk, end = b"x" * 65536, time.time() + hold
while time.time() < end:
    for s in socks:
        try:
            s.send(chunk)
        except (BlockingIOError, OSError):
            pass
    time.sleep(0.01)'
if [ -e "$MEM/$BR_B/memory.kmem.tcp.usage_in_bytes" ]; then
  # The same eight tunnels from A (its socket memory limit is 128MiB) show
  # what they pin where the limit does not bind.
  agentctl exec "$A" -- python3 -c "$FLOOD_PY" "$GW_A" 8 25 >"$WORK/flood-a.out" 2>&1 &
  FLOOD_A=$!
  agentctl exec "$B" -- python3 -c "$FLOOD_PY" "$GW_B" 9 25 >"$WORK/flood-b.out" 2>&1 &
  FLOOD_B=$!
  # The kernel charges a socket past the limit only for what it must send or
  # take at once (a first or a last packet): at most about one packet per socket.
  SLACK=$((1024 * 1024))
  check "B's socket memory reaches its cgroup's limit" wait_until 60 \
    bash -c "[ \$(cat '$MEM/$BR_B/memory.kmem.tcp.max_usage_in_bytes') -ge 4194304 ]"
  check "A's tunnels pin more than B's limit and its slack" wait_until 60 \
    bash -c "[ \$(cat '$MEM/$BR_A/memory.kmem.tcp.usage_in_bytes') -gt $((4194304 + SLACK)) ]"
  held_a=$(cat "$MEM/$BR_A/memory.kmem.tcp.max_usage_in_bytes")
  held_b=$(cat "$MEM/$BR_B/memory.kmem.tcp.max_usage_in_bytes")
  echo "# eight tunnels to a sink that never reads: A's proxy held at most $held_a bytes of socket memory (limit 128MiB), B's $held_b (limit 4MiB)"
  check "B's socket memory is charged to B's cgroup and bounded by its limit" test "$held_b" -le $((4194304 + SLACK))
  check "the sink holds A's and B's sixteen tunnels" test "$(established "$NS" "$SINK_PORT")" -ge 16
  wait "$FLOOD_A" "$FLOOD_B"
  check "B's ninth tunnel is refused (incus.proxyMaxTunnels=8)" grep -q "refused HTTP/1.1 503" "$WORK/flood-b.out"
  check "eight tunnels were open from B" grep -qx "open 8" "$WORK/flood-b.out"
fi

# ---------------------------------------------------------------- an impostor on A's proxy address and pid file
# A process as A's uid takes the proxy's place once it is gone: its address
# and its pid file. agentctl knows the process it started (pid, start time,
# executable), so neither status nor start takes this one for it.
kill -KILL "$PA"
wait_until 30 no_listener "$GW_A" 3128
open_state_dir
# (setpriv itself, not the `as` function: $! is then the impostor's own pid)
setpriv --reuid="$UA" --regid="$UA" --clear-groups --inh-caps=-all "$PY" -c '
import os, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 3128)); s.listen(16)
open(sys.argv[2], "w").write("%d\n" % os.getpid())
while True:
    c = s.accept()[0]; c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")' "$GW_A" "$SA/run/egress-proxy.pid" &
IMPOSTOR=$!
check "the impostor listens on A's proxy address" wait_until 30 listening "$GW_A" 3128
check "the impostor wrote A's pid file" wait_until 30 bash -c "[ \"\$(cat '$SA/run/egress-proxy.pid')\" = $IMPOSTOR ]"
agentctl status "$A" >"$WORK/status-impostor" 2>&1
check "status does not call it A's proxy" bash -c "! grep -Eq '^Egress proxy: .*\\(running' '$WORK/status-impostor'"
check "status names it as not the proxy agentctl started" grep -Eq \
  "^Egress proxy: .*NOT running: pid $IMPOSTOR, .*as uid $UA: not the egress proxy agentctl started" "$WORK/status-impostor"
out=$(agentctl start "$A" 2>&1); rc=$?
check "start refuses to keep it (exit $rc)" test $rc != 0
check "start names the impostor" grep -q "held by a process agentctl did not start (pid $IMPOSTOR," <<<"$out"
check "start stops the sandbox rather than run it beside the impostor" bash -c \
  "incus list -f csv -c s '^$A\$' | grep -qx STOPPED"
check "the impostor was left alone (agentctl signals only what it started)" kill -0 "$IMPOSTOR"
kill "$IMPOSTOR"
wait "$IMPOSTOR" 2>/dev/null
IMPOSTOR=
out=$(agentctl start "$A" 2>&1); rc=$?
check "once it is gone, start brings agentctl's own proxy back (exit $rc)" test $rc = 0
PA2=$(status_pid "$A" "Egress proxy")
check "the new proxy runs as A's uid" test "$(uid_of "$PA2")" = "$UA"

# ---------------------------------------------------------------- logs --network
# A line with terminal escapes written into A's log by hand (as a process of
# A's uid could) comes out escaped; the allowed tunnels are there too.
printf '\033]0;owned\007\033[2J written into the log\n' >>"$SA/run/egress.log"
agentctl logs "$A" --network >"$WORK/logs-a" 2>&1
check "logs --network prints the hand-written line with its escapes made visible" \
  grep -q 'u001b]0;owned\\u0007\\u001b\[2J written into the log' "$WORK/logs-a"
check "logs --network prints no control character" bash -c "! LC_ALL=C grep -q \$'[\\x01-\\x08\\x0b-\\x1f\\x7f]' '$WORK/logs-a'"
check "logs --network shows A's allowed tunnels" grep -Eq "CONNECT +sink\.test:$SINK_PORT +allow" "$WORK/logs-a"

# ---------------------------------------------------------------- delete with another state directory
OTHER=$WORK/other
mkdir -p "$OTHER"
PB=$(status_pid "$B" "Egress proxy")
RB=$(status_pid "$B" Resolver)
PB_STARTED=$(started "$PB") RB_STARTED=$(started "$RB")
out=$(HOME=$OTHER XDG_CONFIG_HOME=$OTHER/.config XDG_STATE_HOME=$OTHER/.local/state \
  "$AGENTCTL" --provider incus delete --force "$B" 2>&1); rc=$?
echo "$out" | sed 's/^/# delete: /'
check "a delete run with another state directory succeeds (exit $rc)" test $rc = 0
check "it stops B's proxy" gone "$PB" "$PB_STARTED"
check "it stops B's resolver" gone "$RB" "$RB_STARTED"
check "nothing listens on B's proxy address any more" no_listener "$GW_B" 3128
check "it removes B's host files" test ! -e "$SB"
check "it removes B's cgroups" test ! -e "$MEM/$BR_B" -a ! -e "$PIDS/$BR_B"
check "B's uid is released (no bridge records it)" bash -c \
  "! incus network list -f json | grep -q '\"user.agentctl.host.uid\":\"$UB\"'"
create "$C"
GW_C=$(incus network get "$(incus config get "$C" user.agentctl.bridge)" ipv4.address | cut -d/ -f1)
check "the next sandbox takes B's subnet, and its proxy comes up there" bash -c \
  "[ '$GW_C' = '$GW_B' ] && agentctl status '$C' | grep -Eq '^Egress proxy: .*\\(running'"

finish
