#!/usr/bin/env bash
# The egress proxy as an instance (incus.proxyPlacement=instance): the sandbox
# leaves only through `agentctl egress-proxy` running in a companion container
# NAME-egress on its own bridge, the placement for an Incus server that is not
# this machine. Forced here on the local daemon, against the real Incus daemon
# (containers), with "public" test hosts in a network namespace the suite
# creates (lib.sh; routes checked before any traffic). Names resolve through
# the proxy's resolve file (incus.proxyResolveFile), pushed into the companion.
#
# Usage: proxy_instance.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
A=itest-h14c-$TAG
C=$A-egress
test_namespace h14c 243
PUB=$NET.2        # allowed.test
PUB_IP=$NET.3     # other.test, and allowed by IP literal on the echo port
PORT=8080         # HTTP
RAW_PORT=8081     # line echo (long-lived connections)
require_incus "network namespaces, nftables, the Incus admin socket"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test servers"
command -v nft >/dev/null 2>&1 || skip "nft is needed (scripts/incus/up.sh installs nftables)"

T_START=$(date +%s%N)
in_a() { agentctl exec "$A" -- "$@"; }
in_c() { incus exec "$C" -- "$@"; }
tcp_from() { tcp_outcome "in_$1" "$2" "$3"; }  # tcp_from a|c HOST PORT

IMP=$A-imp        # an instance that takes the companion's address
SINK=""
cleanup() {
  set +e
  [ -n "$SINK" ] && kill "$SINK" 2>/dev/null
  incus delete --force "$IMP" >/dev/null 2>&1
  "$AGENTCTL" --provider incus delete --force "$A" >/dev/null 2>&1
  stop_public_hosts "$NS" "$VETH_HOST"
  rm -rf "$WORK"
}
trap cleanup EXIT

config_set incus.subnetPool=10.233.0.0/16
config_set incus.proxyPlacement=instance
# The companion's sockets, bounded like a host proxy's by the same settings
# (small here, so the sink below fills them well below the host's limits).
config_set incus.hostSocketMemory=32MiB
config_set incus.proxyMaxTunnels=64
cat >"$WORK/hosts" <<EOF
$PUB allowed.test
$PUB_IP other.test
EOF
config_set "incus.proxyResolveFile=$WORK/hosts"
remove_leftover_namespaces h14cn h14c
start_public_hosts "$NS" "$VETH_HOST" "$VETH_NS" "$NET" "$PUB" "$PUB_IP" || exit 1

# ---------------------------------------------------------------- create
t0=$(date +%s%N)
agentctl create "$A" --image "$IMAGE" --isolation container --mount-none \
  --allow allowed.test:$PORT --allow "$PUB_IP:$RAW_PORT" >"$WORK/create.out" 2>&1
rc=$?
echo "# create $A took $(( ($(date +%s%N) - t0) / 1000000 )) ms"
if [ $rc -ne 0 ]; then cat "$WORK/create.out"; bad "create $A"; finish; exit 1; fi
ok "create $A with incus.proxyPlacement=instance"
check "create starts the proxy in the companion instance" grep -q "egress proxy of $A in instance $C" "$WORK/create.out"
check "create verifies confinement with the whole probe battery" grep -q "network confinement verified (7/7 probes" "$WORK/create.out"
STATUS_JSON=$(agentctl status "$A" -o json)
BR=$(json_field 'd["extra"]["bridge"]' <<<"$STATUS_JSON")
GW=$(incus network get "$BR" ipv4.address | cut -d/ -f1)
PROXY=${GW%.*}.$(( ${GW##*.} + 2 ))
agentctl status "$A" >"$WORK/status" 2>&1
check "status shows the placement: instance $C, running, as nobody" \
  grep -Eq "^Egress proxy: +$PROXY:3128 \(instance $C, running, pid [0-9]+ there, as nobody\)" "$WORK/status"
check "status names the host firewall table (the server is this machine)" grep -q "^Host firewall: *nft table inet agentctl-$BR" "$WORK/status"
check "list shows the sandbox and not its companion" bash -c \
  "'$AGENTCTL' --provider incus list | grep -q '^$A ' && ! '$AGENTCTL' --provider incus list | grep -q '$C'"
check "the companion is agentctl's, marked as the sandbox's egress proxy" bash -c \
  "[ \"\$(incus config get '$C' user.agentctl.role)\" = egress-proxy ] && [ \"\$(incus config get '$C' user.agentctl.sandbox)\" = '$A' ]"
check "the companion has its own uid range, small limits and no guest API" bash -c \
  "[ \"\$(incus config get '$C' security.idmap.isolated)\" = true ] && [ -n \"\$(incus config get '$C' limits.memory)\" ] &&
   [ -n \"\$(incus config get '$C' limits.processes)\" ] && [ \"\$(incus config get '$C' security.guestapi)\" = false ]"
check "the companion has no mounts: its only devices are root, eth0 and the server's routing table" \
  test "$(incus query "/1.0/instances/$C?project=${INCUS_PROJECT:-default}" | python3 -c 'import json,sys; print(" ".join(sorted(json.load(sys.stdin)["expanded_devices"])))')" = "eth0 root server-routes"
check "both NICs filter MAC and IPv4 sources" bash -c \
  "for i in '$A' '$C'; do incus config device get \$i eth0 security.mac_filtering | grep -qx true &&
     incus config device get \$i eth0 security.ipv4_filtering | grep -qx true || exit 1; done"
PID_IN_C=$(in_c systemctl show -p MainPID --value agentctl-egress.service)
check "the proxy process in the companion runs as nobody" bash -c \
  "incus exec '$C' -- sh -c 'grep ^Uid: /proc/$PID_IN_C/status' | awk '{exit !(\$2 == 65534 && \$3 == 65534)}'"
check "the sandbox's proxy settings point at the companion" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- sh -c 'echo \$https_proxy' | grep -qx 'http://$PROXY:3128'"
check "its names resolve at the resolver on the bridge's address, not at the companion" \
  "$AGENTCTL" --provider incus exec "$A" -- grep -qx "nameserver $GW" /etc/resolv.conf

# ---------------------------------------------------------------- through the proxy, and around it
check "allowlisted name over CONNECT through the companion" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- curl -s -p -m 10 http://allowed.test:$PORT/ | grep -q 'hello from $PUB allowed.test'"
check "another name gets 403" test "$(in_a curl -s -o /dev/null -m 10 -w '%{http_code}' http://other.test:$PORT/)" = 403
check "a direct connection to the allowed address, bypassing the proxy, is refused at once" \
  refused_at_once "$AGENTCTL" --provider incus exec "$A" -- curl -s -m 5 --noproxy '*' http://$PUB:$PORT/
check "TCP :53 to the test host is refused" test "$(tcp_from a "$PUB" 53)" = refused
check "an IP-literal allow entry is a direct rule from the sandbox" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- bash -c 'exec 3<>/dev/tcp/$PUB_IP/$RAW_PORT; echo ping >&3; head -n1 <&3' | grep -qx ping"
for port in 22 $PORT; do
  check "the sandbox cannot reach the companion on port $port" test "$(tcp_from a "$PROXY" $port)" != connected
done
check "the sandbox cannot reach the host (bridge address, port 22)" test "$(tcp_from a "$GW" 22)" = refused
check "the sandbox cannot reach a proxy port on the host" test "$(tcp_from a "$GW" 3128)" = refused
check "the companion cannot reach the host (bridge address, port 22)" test "$(tcp_from c "$GW" 22)" = refused
check "the companion reaches the outside (the proxy vets every address)" test "$(tcp_from c "$PUB" $PORT)" = connected
check "the companion has no IPv6" bash -c "[ \"\$(incus exec '$C' -- cat /proc/sys/net/ipv6/conf/all/disable_ipv6)\" = 1 ]"

# ---------------------------------------------------------------- live policy: add, remove cuts an open tunnel
check "policy add succeeds" agentctl policy add "$A" other.test:$RAW_PORT
before=$(established "$NS" $RAW_PORT)
in_a python3 -c "$HOLD_CONNECTION_PY" "$PROXY" 3128 other.test:$RAW_PORT >"$WORK/tunnel" 2>&1 &
LONG=$!
wait_until 60 more_established "$NS" $RAW_PORT "$before"
check "policy remove of the name succeeds" agentctl policy remove "$A" other.test:$RAW_PORT
wait $LONG
check "a CONNECT tunnel through the companion was open (policy add was live)" grep -q "^open HTTP/1.1 200" "$WORK/tunnel"
check "policy remove closed the open tunnel" grep -q "^cut" "$WORK/tunnel"
agentctl logs "$A" --network >"$WORK/logs" 2>&1
check "logs --network reads the proxy's log from the companion" bash -c \
  "grep -q allowed.test '$WORK/logs' && grep 'other.test' '$WORK/logs' | grep -q not-allowlisted"

# ---------------------------------------------------------------- the companion's TCP memory is bounded
# A destination that accepts and never reads: every tunnel to it pins socket
# memory in the companion (the sandbox's bytes the proxy holds). The proxy
# caps the tunnels (503 tunnel-limit beyond incus.proxyMaxTunnels, 64 here),
# and the companion's memory cgroup caps their kernel TCP memory
# (incus.hostSocketMemory, 32 MiB here; memory.kmem.tcp on this cgroup v1
# host), far below the host's tcp_mem: the sandbox fills its cap, never the
# host's.
SINK_PORT=8095
ip netns exec "$NS" python3 -c '
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(1024)
held = []
while True:
    c, _ = l.accept(); held.append(c)
' "$PUB" "$SINK_PORT" &
SINK=$!
companion_memcg() {  # the companion's memory cgroup directory (cgroup v1)
  local pid path
  pid=$(incus query "/1.0/instances/$C/state?project=${INCUS_PROJECT:-default}" | json_field 'd["pid"]')
  path=$(awk -F: '$2 == "memory" {print $3}' "/proc/$pid/cgroup" | sed -E 's#^(.*/lxc\.payload\.[^/]+).*#\1#')
  echo "/sys/fs/cgroup/memory$path"
}
MEMCG=$(companion_memcg)
if [ -e "$MEMCG/memory.kmem.tcp.limit_in_bytes" ]; then
  check "the companion's kernel TCP memory is limited by incus.hostSocketMemory (32 MiB)" \
    test "$(cat "$MEMCG/memory.kmem.tcp.limit_in_bytes")" = 33554432
  agentctl policy add "$A" allowed.test:$SINK_PORT >/dev/null
  tcp_pages() { awk '$1 == "TCP:" {for (i = 2; i < NF; i++) if ($i == "mem") print $(i + 1)}' /proc/net/sockstat; }
  before=$(tcp_pages)
  in_a python3 -c '
import socket, sys, time
proxy, port, target, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
socks, refused = [], []
for _ in range(n):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    s.connect((proxy, port)); s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d: break
        head += d
    line = head.split(b"\r\n")[0]
    if b" 200" in line: socks.append(s)
    else: refused.append(line.decode(errors="replace")); s.close()
for s in socks: s.setblocking(False)
chunk, sent, idle, deadline = b"x" * 65536, 0, time.time(), time.time() + 40
while time.time() < deadline and time.time() - idle < 3:
    for s in socks:
        try:
            sent += s.send(chunk); idle = time.time()
        except OSError:  # full (EAGAIN), or closed by the proxy
            pass
    time.sleep(0.05)
print("opened", len(socks), "refused", len(refused), "sent", sent)
print("first refusal", refused[0] if refused else "-")
' "$PROXY" 3128 "allowed.test:$SINK_PORT" 70 >"$WORK/sink.out" 2>&1
  after=$(tcp_pages)
  cat "$WORK/sink.out" | sed 's/^/# /'
  peak=$(cat "$MEMCG/memory.kmem.tcp.max_usage_in_bytes")
  echo "# host TCP memory: $before -> $after pages; the companion's peak $((peak / 1048576)) MiB"
  check "the proxy opens at most incus.proxyMaxTunnels tunnels for the sandbox, the rest get 503" \
    bash -c "grep -q '^opened 64 refused 6 ' '$WORK/sink.out' && grep -q '^first refusal HTTP/1.1 503' '$WORK/sink.out'"
  # (This kernel keeps no failcnt for TCP memory: the peak tells.)
  check "the tunnels filled the companion's TCP memory cap (the limit was hit)" test "$peak" -ge $((33554432 - 2097152))
  # The kernel still charges what it must (an ACK, a FIN: a few KiB a socket)
  # past a full cap; unbounded, these 64 tunnels held about 64 MiB there.
  check "and the companion's TCP memory stayed at the cap (32 MiB, and at most 8 MiB the kernel forces past it)" \
    test "$peak" -le $((33554432 + 8388608))
  agentctl policy remove "$A" allowed.test:$SINK_PORT >/dev/null
else
  echo "# no cgroup v1 memory controller for the companion ($MEMCG): its TCP memory is part of limits.memory"
fi
kill "$SINK" 2>/dev/null; SINK=""

# ---------------------------------------------------------------- the unit keeps the proxy up
curl_ok() { "$AGENTCTL" --provider incus exec "$A" -- curl -s -m 3 http://allowed.test:$PORT/ 2>/dev/null | grep -q hello; }
eventually() { wait_until 60 "$@"; }
in_c sh -c 'kill -9 "$(systemctl show -p MainPID --value agentctl-egress.service)"'
check "a killed proxy is restarted by its unit" eventually curl_ok
incus restart --force "$C"
check "the proxy comes back with its companion (enabled unit)" eventually curl_ok

# ---------------------------------------------------------------- fail closed, restored by start
incus stop --force "$C"
check "status says the companion's proxy is not running" bash -c \
  "'$AGENTCTL' --provider incus status '$A' | grep -q 'instance $C, NOT running'"
# Nothing answers for the companion's address now: the sandbox's connection
# fails (no route to it, or no answer within curl's limit), never around it.
t0=$(date +%s%N)
check "with the companion stopped the sandbox has no egress" \
  bash -c "! '$AGENTCTL' --provider incus exec '$A' -- curl -s -m 5 http://allowed.test:$PORT/ >/dev/null 2>&1"
echo "# the failed request took $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check "and no direct way either" test "$(tcp_from a "$PUB" $PORT)" = refused
agentctl start "$A" >"$WORK/start.out" 2>&1
check "start restores the companion and its proxy" bash -c "'$AGENTCTL' --provider incus status '$A' | grep -q 'instance $C, running'"
check "start does not copy agentctl again (same hash)" bash -c "! grep -q 'copying agentctl' '$WORK/start.out'"
check "start verifies confinement again" grep -q "network confinement verified (7/7 probes" "$WORK/start.out"
check "egress works again after start" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- curl -s -m 10 http://allowed.test:$PORT/ | grep -q hello"
# ---------------------------------------------------------------- an instance that takes the companion's address
# The bridge admits the proxy's traffic by the companion's address, and
# Incus 6.0 has no per-port ACL on a bridge: while the companion is stopped,
# an instance attached to the sandbox's bridge can take that address and
# serve the sandbox as an open proxy. status names it and is not "verified";
# start refuses and stops the sandbox rather than run beside it.
incus stop --force "$C"
POOL=$(incus config device get "$C" root pool)
PREFIX=$(incus network get "$BR" ipv4.address | cut -d/ -f2)
incus init "$IMAGE" "$IMP" --no-profiles --storage "$POOL" >/dev/null &&
  incus config device add "$IMP" eth0 nic network="$BR" name=eth0 >/dev/null &&
  incus start "$IMP" || bad "cannot start the test's instance $IMP"
wait_until 60 incus exec "$IMP" -- true
incus exec "$IMP" -- ip addr add "$PROXY/$PREFIX" dev eth0
incus exec "$IMP" -- ip route replace default via "$GW" src "$PROXY"
incus file push "$(dirname "$0")/tcp_relay.py" "$IMP/root/tcp_relay.py" >/dev/null
incus exec "$IMP" -- sh -c "setsid python3 /root/tcp_relay.py connect-proxy $PROXY </dev/null >/dev/null 2>&1 &"
served() { "$AGENTCTL" --provider incus exec "$A" -- curl -s -m 3 -p -x "http://$PROXY:3128" "http://$PUB:$PORT/" | grep -q hello; }
if wait_until 60 served; then
  echo "# the instance with the companion's address serves the sandbox while the companion is stopped"
else
  echo "# the instance with the companion's address did not serve the sandbox"
fi
one_line() { tr -s ' \n' '  ' <"$1"; }  # the CLI wraps long lines
agentctl status "$A" >"$WORK/status-imp" 2>&1
grep -i "confinement" -A3 "$WORK/status-imp" | sed 's/^/# /'
check "status names the instance on the sandbox's bridge" \
  bash -c "grep -q \"instance $IMP is on the sandbox's bridge $BR\" <<<\"\$1\"" _ "$(one_line "$WORK/status-imp")"
check "status does not say verified" bash -c "! grep -Eq '^Confinement: +verified' '$WORK/status-imp'"
agentctl start "$A" >"$WORK/start-imp.out" 2>&1; rc=$?
tail -4 "$WORK/start-imp.out" | sed 's/^/# /'
check "start refuses while the instance is on the bridge (exit $rc)" bash -c \
  "[ $rc != 0 ] && grep -q 'instance $IMP is on the sandbox' <<<\"\$1\"" _ "$(one_line "$WORK/start-imp.out")"
check "and stops the sandbox rather than let it run beside it" bash -c \
  "incus list -f csv -c s '^$A\$' | grep -qx STOPPED"
not_served() { ! served; }
check "so the sandbox cannot use it" not_served
incus delete --force "$IMP" >/dev/null
agentctl start "$A" >"$WORK/start-after.out" 2>&1
check "with it gone, start brings the sandbox and its companion back, verified" \
  grep -q "network confinement verified (7/7 probes" "$WORK/start-after.out"

check "stop stops the companion too" bash -c \
  "'$AGENTCTL' --provider incus stop '$A' >/dev/null && incus list -f csv -c s '^$C\$' | grep -qx STOPPED"
check "the companion cannot be deleted as a sandbox" bash -c \
  "! '$AGENTCTL' --provider incus delete --force '$C' >/dev/null 2>&1 && incus info '$C' >/dev/null 2>&1"

# ---------------------------------------------------------------- delete removes both instances and the bridge
agentctl delete --force "$A" >"$WORK/delete.out" 2>&1
check "delete succeeds" grep -q "deleting the egress proxy instance $C" "$WORK/delete.out"
check "delete removes the sandbox and its companion" bash -c \
  "! incus info '$A' >/dev/null 2>&1 && ! incus info '$C' >/dev/null 2>&1"
check "delete removes the bridge and the ACL" bash -c \
  "! incus network show '$BR' >/dev/null 2>&1 && ! incus network acl show 'agentctl-$A' >/dev/null 2>&1"
check "delete removes the nft table" bash -c "! nft list table inet 'agentctl-$BR' >/dev/null 2>&1"

echo "# the suite took $(( ($(date +%s%N) - T_START) / 1000000 )) ms"
finish
