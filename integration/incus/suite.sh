#!/usr/bin/env bash
# The Incus integration suite: drives the built agentctl binary against the real
# Incus daemon with --isolation container and checks, from inside the sandboxes,
# the user, exit codes, mounts, the network policy, published ports, delete, and
# cleanup after an interrupted create.
#
# Every test destination is on this machine: servers in a network namespace the
# suite creates (with one "public" and one private address, routed only to that
# namespace), on a sandbox bridge's host address, or in the other sandbox.
#
# With AGENTCTL_REMOTE set (integration/incus/remote.sh), every agentctl command
# goes to that Incus remote over HTTPS instead of the unix socket. The direct
# `incus` calls that inspect the daemon still use the local socket: the remote is
# this machine's own daemon on a loopback listener, so they see the same state.
#
# Usage: suite.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

AGENTCTL=${1:?usage: suite.sh AGENTCTL_BINARY}
IMAGE=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
TAG=$$
A=itest-a-$TAG
B=itest-b-$TAG
C=itest-c-$TAG
NS=agcit$TAG
VETH_HOST=agcit${TAG}h
VETH_NS=agcit${TAG}n
PUBLIC_NET=11.213.77      # routed to the namespace only (checked before any traffic)
PUBLIC=$PUBLIC_NET.2      # allowed, port 8001
PUBLIC_OTHER=$PUBLIC_NET.3
LAN_NET=172.31.213
LAN=$LAN_NET.2            # allowed by --allow, but private: deny-LAN must drop it
ALLOWED_PORT=8001
OTHER_PORT=8002
WORK=$(mktemp -d /tmp/agentctl-incus-suite.XXXXXX)
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config
mkdir -p "$HOME"

. "$(dirname "$0")/lib.sh"
require_incus "network namespaces, and the Incus admin socket"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test servers"


SERVER_PIDS=()
cleanup() {
  set +e
  for pid in "${SERVER_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for n in "$A" "$B" "$C"; do agentctl delete --force "$n" >/dev/null 2>&1; done
  incus image delete "itest-img-$TAG" >/dev/null 2>&1
  ip netns del "$NS" 2>/dev/null
  ip link del "$VETH_HOST" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# A TCP server that answers "hello PORT" and exits after at most 300 s.
server_py='
import socket, sys, threading, time
def serve(addr, port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(8)
    while True:
        c, _ = s.accept(); c.sendall(b"hello %d\n" % port); c.close()
for spec in sys.argv[1:]:
    a, p = spec.rsplit(":", 1)
    threading.Thread(target=serve, args=(a, int(p)), daemon=True).start()
time.sleep(300)
'

# ---------------------------------------------------------------- namespace with test servers
remove_leftover_namespaces agcit agcit
ip netns add "$NS" || { echo "cannot create a network namespace"; exit 1; }
ip link add "$VETH_HOST" type veth peer name "$VETH_NS"
ip link set "$VETH_NS" netns "$NS"
ip addr add "$PUBLIC_NET.1/24" dev "$VETH_HOST"
ip addr add "$LAN_NET.1/24" dev "$VETH_HOST"
ip link set "$VETH_HOST" up
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$PUBLIC/24" dev "$VETH_NS"
ip -n "$NS" addr add "$PUBLIC_OTHER/24" dev "$VETH_NS"
ip -n "$NS" addr add "$LAN/24" dev "$VETH_NS"
ip -n "$NS" link set "$VETH_NS" up
ip -n "$NS" route add default via "$PUBLIC_NET.1"
for dst in "$PUBLIC" "$PUBLIC_OTHER" "$LAN"; do
  ip route get "$dst" | grep -q "dev $VETH_HOST" || { echo "refusing to run: $dst is not routed to the test namespace"; exit 1; }
done
ip netns exec "$NS" python3 -c "$server_py" "$PUBLIC:$ALLOWED_PORT" "$PUBLIC:$OTHER_PORT" \
  "$PUBLIC_OTHER:$ALLOWED_PORT" "$LAN:$ALLOWED_PORT" &
SERVER_PIDS+=($!)
for _ in $(seq 100); do bash -c "exec 3<>/dev/tcp/$PUBLIC/$ALLOWED_PORT" 2>/dev/null && break; sleep 0.1; done
check "test servers answer from the host" \
  bash -c "exec 3<>/dev/tcp/$PUBLIC/$ALLOWED_PORT && head -c 5 <&3 | grep -q hello"

# ---------------------------------------------------------------- sandboxes
RO=$WORK/ro RW=$WORK/rw
mkdir -p "$RO" "$RW"; echo original >"$RO/file"
chown 1500:1500 "$RW"
HOST_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

start=$(date +%s%N)
agentctl create "$A" --image "$IMAGE" --isolation container --mount-only \
  --mount "$RO:/ro" --mount "$RW:/rw:w" --allow "$PUBLIC:$ALLOWED_PORT" --allow "$LAN:$ALLOWED_PORT" \
  --port "127.0.0.1:$HOST_PORT:8080" >"$WORK/create-a.out" 2>&1
rc=$?
echo "# create $A took $(( ($(date +%s%N) - start) / 1000000 )) ms"
if [ $rc -ne 0 ]; then cat "$WORK/create-a.out"; bad "create $A"; echo "# $PASS passed, $FAIL failed"; exit 1; fi
ok "create $A"
check "create reports network confinement verified" grep -q "network confinement verified" "$WORK/create-a.out"
check "create prints the mount report" grep -q "$RW -> /rw (writable)" "$WORK/create-a.out"
agentctl create "$B" --image "$IMAGE" --isolation container --mount-none >"$WORK/create-b.out" 2>&1 \
  && ok "create $B" || { cat "$WORK/create-b.out"; bad "create $B"; }

# ---------------------------------------------------------------- user, root, exit codes
check "exec runs as the sandbox user" test "$(agentctl exec "$A" -- whoami)" = agent
check "the sandbox user has uid 1500 and its home" test "$(agentctl exec "$A" -- sh -c 'echo $(id -u) $HOME $(pwd)')" = "1500 /home/agent /home/agent"
check "exec --root runs as root" test "$(agentctl exec --root "$A" -- whoami)" = root
agentctl exec "$A" -- sh -c 'exit 7'; rc=$?
check "exit codes pass through (7)" test $rc = 7
check "stderr is passed through" test "$(agentctl exec "$A" -- sh -c 'echo err >&2' 2>&1 >/dev/null)" = err
check "passwordless sudo works" test "$(agentctl exec "$A" -- sudo -n whoami)" = root

# ---------------------------------------------------------------- mounts
check "read-only mount is readable" test "$(agentctl exec "$A" -- cat /ro/file)" = original
check "read-only mount refuses the user" bash -c "! agentctl exec '$A' -- touch /ro/x 2>/dev/null"
check "read-only mount refuses root" bash -c "! agentctl exec --root '$A' -- touch /ro/x 2>/dev/null"
check "read-only mount cannot be remounted by root" \
  bash -c "! agentctl exec --root '$A' -- sh -c 'mount -o remount,rw /ro && touch /ro/x' 2>/dev/null"
check "nothing was written through the read-only mount" test ! -e "$RO/x"
check "writable mount takes the user's writes" agentctl exec "$A" -- sh -c 'echo from-guest >/rw/out'
check "the write reached the host, owned by the mapped user" \
  bash -c "test \"\$(cat '$RW/out')\" = from-guest && test \"\$(stat -c %u '$RW/out')\" = 1500"

# ---------------------------------------------------------------- network policy
probe() { tcp_outcome agentctl exec "$1" -- "$2" "$3"; }  # probe SANDBOX IP PORT
GW_A=$(incus network get "$(agentctl status "$A" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["extra"]["bridge"])')" ipv4.address | cut -d/ -f1)
IP_B=$(agentctl status "$B" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ips"][0])')
check "allowed destination $PUBLIC:$ALLOWED_PORT is reachable" test "$(probe "$A" "$PUBLIC" $ALLOWED_PORT)" = connected
check "allowed destination answers" \
  bash -c "agentctl exec '$A' -- bash -c 'exec 3<>/dev/tcp/$PUBLIC/$ALLOWED_PORT; head -c 10 <&3' | grep -q 'hello $ALLOWED_PORT'"
check "other port on the allowed address is refused" test "$(probe "$A" "$PUBLIC" $OTHER_PORT)" != connected
check "other address is refused" test "$(probe "$A" "$PUBLIC_OTHER" $ALLOWED_PORT)" != connected
check "LAN address is refused under deny-LAN, even when allowed by name" test "$(probe "$A" "$LAN" $ALLOWED_PORT)" != connected
check "the sandbox's own bridge host address is refused" test "$(probe "$A" "$GW_A" 22)" != connected
guest_server() {  # guest_server SANDBOX ADDR:PORT: the same server, started in the guest
  agentctl exec "$1" -- sh -c "echo $(printf '%s' "$server_py" | base64 -w0) | base64 -d >/tmp/server.py && \
    (setsid python3 /tmp/server.py $2 >/dev/null 2>&1 </dev/null &)"
  for _ in $(seq 50); do [ "$(probe "$1" "${2%:*}" "${2##*:}")" = connected ] && return 0; sleep 0.2; done
  return 1
}
guest_server "$B" 0.0.0.0:9000
check "$B listens (seen from inside $B)" test "$(probe "$B" 127.0.0.1 9000)" = connected
check "the other sandbox is refused" test "$(probe "$A" "$IP_B" 9000)" != connected
check "sandbox B, with no allow rules, cannot reach $PUBLIC" test "$(probe "$B" "$PUBLIC" $ALLOWED_PORT)" != connected

# Live policy update: allow the other port, no restart.
check "policy add succeeds" agentctl policy add "$A" "$PUBLIC:$OTHER_PORT"
check "policy add opens a port live" test "$(probe "$A" "$PUBLIC" $OTHER_PORT)" = connected

# ---------------------------------------------------------------- published port
guest_server "$A" 127.0.0.1:8080
check "published port answers on 127.0.0.1:$HOST_PORT" \
  bash -c "exec 3<>/dev/tcp/127.0.0.1/$HOST_PORT && head -c 10 <&3 | grep -q 'hello 8080'"
check "a taken host port is refused before Incus is asked" \
  bash -c "agentctl create '$C' --image '$IMAGE' --isolation container --mount-none --port 127.0.0.1:$HOST_PORT:80 2>&1 | grep -q 'already in use'"

# ---------------------------------------------------------------- stop, start, snapshots
check "stop" agentctl stop "$B"
check "stopped sandbox shows as Stopped" bash -c "agentctl list | grep '$B' | grep -q Stopped"
agentctl start "$B" >"$WORK/start-b.out" 2>&1
check "start verifies confinement again" grep -q "network confinement verified" "$WORK/start-b.out"
check "start prints the (empty) mount report" grep -q "no host directories are exposed to this sandbox" "$WORK/start-b.out"
check "start of a running sandbox is harmless" agentctl start "$B"
check "snapshot create" agentctl snapshot create "$B" snap1
agentctl exec "$B" -- sh -c 'echo after >/home/agent/marker'
check "snapshot list" bash -c "agentctl snapshot list '$B' | grep -q snap1"
check "stop before restore" agentctl stop --force "$B"
check "snapshot restore" agentctl snapshot restore "$B" snap1
agentctl start "$B" >/dev/null 2>&1
check "restore rolled the file back" bash -c "! agentctl exec '$B' -- test -e /home/agent/marker"
check "snapshot delete" agentctl snapshot delete "$B" snap1
check "stop again" agentctl stop --force "$B"
agentctl start "$B" --mount "$RO:/ro2" >"$WORK/start-b2.out" 2>&1
check "start with a new mount reports it" grep -q "$RO -> /ro2 (read-only)" "$WORK/start-b2.out"
check "the new mount is there after start" test "$(agentctl exec "$B" -- cat /ro2/file)" = original
check "mounts are sticky: a bare start keeps them" bash -c "agentctl start '$B' 2>&1 | grep -q '/ro2 (read-only)'"

# ---------------------------------------------------------------- status and delete
check "status shows the confinement" bash -c "agentctl status '$A' | grep -q 'Confinement: *verified'"
check "list shows both sandboxes" bash -c "agentctl list | grep -q '$A' && agentctl list | grep -q '$B'"
BR_A=$(agentctl status "$A" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["extra"]["bridge"])')
check "delete without --force refuses a running sandbox" bash -c "! agentctl delete '$A' 2>/dev/null"
check "delete --force" agentctl delete --force "$A"
check "no instance left" bash -c "! incus info '$A' >/dev/null 2>&1"
check "no bridge left" bash -c "! incus network show '$BR_A' >/dev/null 2>&1"
check "no ACL left" bash -c "! incus network acl show 'agentctl-$A' >/dev/null 2>&1"
agentctl delete --force "$B" >/dev/null 2>&1

# ---------------------------------------------------------------- VMs where the host has none
if ! incus query /1.0 | grep -q '"driver": ".*qemu'; then
  out=$(agentctl create "$C" --image "$IMAGE" --mount-none 2>&1); rc=$?
  check "a VM sandbox on a host without VM support fails with exit 1" test $rc = 1
  check "the error says how to choose a container" bash -c "grep -q -- '--isolation container' <<<\"\$1\"" _ "$out"
  check "the failed VM create left nothing" bash -c \
    "! incus info '$C' >/dev/null 2>&1 && ! incus network acl show 'agentctl-$C' >/dev/null 2>&1"
fi

# ---------------------------------------------------------------- image build (no packages: no network needed)
IMG=itest-img-$TAG
check "image build publishes a local image" agentctl image build "$IMG" --base "$IMAGE"
check "the built image has its alias" bash -c "incus image alias list -f csv | cut -d, -f1 | grep -qx '$IMG'"
check "the build sandbox is gone" bash -c "! incus list -f csv -c n | grep -q '^agentctl-build-'"
incus image delete "$IMG" >/dev/null 2>&1

# ---------------------------------------------------------------- interrupted create
"$AGENTCTL" --provider incus ${AGENTCTL_REMOTE:+--remote "$AGENTCTL_REMOTE"} create "$C" --image "$IMAGE" --isolation container --mount-none >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do incus info "$C" >/dev/null 2>&1 && break; sleep 0.05; done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
check "delete after a killed create succeeds" agentctl delete --force "$C"
check "nothing of the killed create is left" bash -c \
  "! incus info '$C' >/dev/null 2>&1 && ! incus network acl show 'agentctl-$C' >/dev/null 2>&1"
# Killed earlier: as soon as its ACL exists, before the bridge and the instance.
"$AGENTCTL" --provider incus ${AGENTCTL_REMOTE:+--remote "$AGENTCTL_REMOTE"} create "$C" --image "$IMAGE" --isolation container --mount-none >/dev/null 2>&1 &
pid=$!
for _ in $(seq 200); do incus network acl show "agentctl-$C" >/dev/null 2>&1 && break; sleep 0.02; done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
check "delete after a create killed early succeeds" agentctl delete --force "$C"
check "nothing of the early-killed create is left" bash -c \
  "! incus info '$C' >/dev/null 2>&1 && ! incus network acl show 'agentctl-$C' >/dev/null 2>&1"
left=$(incus network list -f json | python3 -c "import json,sys; print(' '.join(n['name'] for n in json.load(sys.stdin) if n.get('config',{}).get('user.agentctl.sandbox','') in ('$A', '$B', '$C')))")
check "no bridge of the suite is left ($left)" test -z "$left"

finish
