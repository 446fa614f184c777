#!/usr/bin/env bash
# The warm pool suite, against the real Incus daemon (containers):
#   - `pool fill` makes incus.pool.size entries: running, hidden from `list`,
#     refused by the verbs that take a sandbox's name, and allowing nothing
#     (root inside an entry reaches neither a test host directly nor through
#     the entry's proxy);
#   - a create like the entries takes one: the sandbox is listed and verified
#     under its own name, reaches what it allows and nothing else, answers
#     exec, policy, stop, start and delete; the other entry still allows
#     nothing; the pool refills in the background;
#   - a create the pool cannot serve (a writable mount) makes a sandbox of its
#     own; two creates at once both succeed;
#   - a create killed while it took an entry (replayed: the entry marked as
#     taken by a create that did not finish) is cleaned up by the next create
#     of the name, and by gc;
#   - delete and `pool drain` leave nothing of an entry behind.
# Every test destination is on this machine (a network namespace the suite
# creates, routed only to itself). Everything made here is removed on exit.
#
# Usage: pool.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
A=itest-pl-a-$TAG
B=itest-pl-b-$TAG
C=itest-pl-c-$TAG
D=itest-pl-d-$TAG
K=itest-pl-k-$TAG
G=itest-pl-g-$TAG
test_namespace agpl 237
PUB=$NET.2    # allowed.test
PUB_IP=$NET.3 # other.test
PORT=8080
require_incus "network namespaces, nftables, the Incus admin socket"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test servers"
command -v nft >/dev/null 2>&1 || skip "nft is needed (scripts/incus/up.sh installs nftables)"

# entries: the pool's entries, one name per line.
entries() { agentctl pool -o json | json_field '"\n".join(e["name"] for e in d["entries"])'; }
# instance_of NAME: the Incus instance of sandbox NAME.
instance_of() {
  incus list -f json | python3 -c '
import json, sys
for i in json.load(sys.stdin):
    c = i.get("config", {})
    if i["name"] == sys.argv[1] or c.get("user.agentctl.name") == sys.argv[1]: print(i["name"])' "$1"
}
# as_root_in INSTANCE CMD...: CMD as root in the instance, past agentctl.
as_root_in() { incus exec "$1" -- "${@:2}"; }
gateway_of() { incus config get "$1" user.agentctl.subnet | cut -d/ -f1; }

SERVER_PIDS=()
cleanup() {
  set +e
  for pid in "${SERVER_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for n in "$A" "$B" "$C" "$D" "$K" "$G"; do agentctl delete --force "$n" >/dev/null 2>&1; done
  agentctl pool drain >/dev/null 2>&1  # after a refill under way: it holds the pool's lock
  stop_public_hosts "$NS" "$VETH_HOST"
  rm -rf "$WORK"
}
trap cleanup EXIT

config_set incus.subnetPool=10.237.0.0/16
cat >"$WORK/hosts" <<EOF
$PUB allowed.test
$PUB_IP other.test
EOF
config_set "incus.proxyResolveFile=$WORK/hosts"
remove_leftover_namespaces agpln agpl
start_public_hosts "$NS" "$VETH_HOST" "$VETH_NS" "$NET" "$PUB" "$PUB_IP" || exit 1
SERVER_PIDS+=("$PUBLIC_PID")
check "test servers answer from the host" bash -c "curl -s http://$PUB:$PORT/ | grep -q hello"

# ---------------------------------------------------------------- fill
check "without incus.pool.size a create makes its sandbox (pool size 0)" \
  test "$(agentctl pool -o json | json_field 'd["size"]')" = 0
config_set incus.pool.size=2
agentctl pool fill >"$WORK/fill.out" 2>&1
check "pool fill makes 2 entries" grep -q "made 2 pool entries" "$WORK/fill.out"
mapfile -t E < <(entries)
check "pool lists 2 ready entries" test "$(agentctl pool -o json | json_field 'd["ready"]')" = 2
check "a second fill makes none" bash -c "agentctl pool fill 2>&1 | grep -q 'the pool was full'"
check "list does not show the entries" bash -c "! agentctl list | grep -q agc-pool-"
out=$(agentctl status "${E[0]}" 2>&1)
check "status refuses an entry by its name" grep -q "entry of the warm pool, not a sandbox" <<<"$out"
check "exec refuses an entry by its name" bash -c "! agentctl exec '${E[0]}' -- true 2>/dev/null"
check "create refuses a name of the pool's" bash -c "! agentctl create agc-pool-$TAG --isolation container --mount-none 2>/dev/null"
GW0=$(gateway_of "${E[0]}")
check "root in an entry cannot reach a test host directly (refused at once)" \
  refused_at_once as_root_in "${E[0]}" curl -s -m 5 --noproxy '*' "http://$PUB:$PORT/"
check "root in an entry gets 403 from its proxy for any name" \
  test "$(as_root_in "${E[0]}" curl -s -o /dev/null -m 10 -w '%{http_code}' -x "http://$GW0:3128" "http://allowed.test:$PORT/")" = 403

# ---------------------------------------------------------------- a create takes an entry
agentctl create "$A" --image "$IMAGE" --isolation container --mount-none --allow "allowed.test:$PORT" \
  >"$WORK/create-a.out" 2>&1
check "create $A succeeds" test $? = 0
check "create $A took an entry from the warm pool" grep -q "from the warm pool" "$WORK/create-a.out"
check "create $A verified its confinement" grep -q "network confinement verified (7/7 probes" "$WORK/create-a.out"
IA=$(instance_of "$A")
check "$A runs as one of the entries ($IA)" bash -c "printf '%s\n' ${E[*]} | grep -qx '$IA'"
check "list shows $A by its name" bash -c "agentctl list | grep -q '^$A '"
check "status $A: verified" bash -c "agentctl status '$A' | grep -Eq '^Confinement: +verified'"
check "status -o json names $A" test "$(agentctl status "$A" -o json | json_field 'd["name"]')" = "$A"
check "$A reaches what it allows" bash -c \
  "agentctl exec '$A' -- curl -s -m 10 http://allowed.test:$PORT/ | grep -q 'hello from $PUB'"
check "$A gets 403 for another name" \
  test "$(agentctl exec "$A" -- curl -s -o /dev/null -m 10 -w '%{http_code}' "http://other.test:$PORT/")" = 403
check "$A cannot connect directly (refused at once)" \
  refused_at_once agentctl exec "$A" -- curl -s -m 5 --noproxy '*' "http://$PUB:$PORT/"
OTHER=${E[0]}; [ "$OTHER" = "$IA" ] && OTHER=${E[1]}
check "the other entry still gets 403 for $A's name" \
  test "$(as_root_in "$OTHER" curl -s -o /dev/null -m 10 -w '%{http_code}' -x "http://$(gateway_of "$OTHER"):3128" "http://allowed.test:$PORT/")" = 403
check "a second create of $A is refused" bash -c "! agentctl create '$A' --isolation container --mount-none 2>/dev/null"
agentctl policy add "$A" "other.test:$PORT" >"$WORK/policy.out" 2>&1
check "policy add on $A" grep -q "network confinement verified" "$WORK/policy.out"
check "$A reaches the name it was given" bash -c \
  "agentctl exec '$A' -- curl -s -m 10 http://other.test:$PORT/ | grep -q hello"
check "stop $A" agentctl stop "$A"
check "start $A" agentctl start "$A"
check "status $A after start: verified" bash -c "agentctl status '$A' | grep -Eq '^Confinement: +verified'"
check "pool fill waits for the refill and the pool is full again" bash -c \
  "agentctl pool fill >/dev/null 2>&1 && test \"\$(agentctl pool -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"ready\"])')\" = 2"

# ---------------------------------------------------------------- what the pool does not serve; two at once
mkdir -p "$WORK/proj"
agentctl create "$D" --image "$IMAGE" --isolation container --mount-only --mount "$WORK/proj:/workspace" \
  >"$WORK/create-d.out" 2>&1
check "a create with a mount succeeds" test $? = 0
check "a create with a mount makes its own sandbox" bash -c "! grep -q 'from the warm pool' '$WORK/create-d.out' && test \"\$(incus list -f csv -c n '$D')\" = '$D'"
agentctl create "$B" --image "$IMAGE" --isolation container --mount-none >"$WORK/create-b.out" 2>&1 &
pb=$!
agentctl create "$C" --image "$IMAGE" --isolation container --mount-none >"$WORK/create-c.out" 2>&1
rc_c=$?
wait $pb
rc_b=$?
check "two creates at once both succeed ($rc_b $rc_c)" test "$rc_b$rc_c" = 00
IB=$(instance_of "$B") IC=$(instance_of "$C")
check "they run as different instances ($IB, $IC)" bash -c "[ -n '$IB' ] && [ -n '$IC' ] && [ '$IB' != '$IC' ]"

# ---------------------------------------------------------------- a create killed while it took an entry
agentctl pool fill >/dev/null 2>&1
mapfile -t E < <(entries)
# What such a create leaves: the entry no longer the pool's, named, unfinished.
incus config set "${E[0]}" user.agentctl.role= user.agentctl.pool.template= user.agentctl.name="$K" \
  user.agentctl.create.pending=true
agentctl create "$K" --image "$IMAGE" --isolation container --mount-none >"$WORK/create-k.out" 2>&1
check "the next create of the name succeeds" test $? = 0
check "it removed what the killed create left" grep -q "unfinished create of $K" "$WORK/create-k.out"
check "nothing of the half-taken entry is left" test -z "$(leftovers_of "${E[0]}")"
check "exactly one instance is $K" test "$(instance_of "$K" | wc -l)" = 1
agentctl pool fill >/dev/null 2>&1
mapfile -t E < <(entries)
incus config set "${E[0]}" user.agentctl.role= user.agentctl.pool.template= user.agentctl.name="$G" \
  user.agentctl.create.pending=true
agentctl gc >"$WORK/gc.out" 2>&1
check "gc removes a half-taken entry" grep -q "${E[0]}" "$WORK/gc.out"
check "nothing of it is left" test -z "$(leftovers_of "${E[0]}")"

# ---------------------------------------------------------------- delete and drain
check "delete $A" agentctl delete --force "$A"
check "nothing of $A's instance is left" test -z "$(leftovers_of "$IA")"
agentctl pool fill >/dev/null 2>&1
mapfile -t E < <(entries)
check "pool drain removes every entry" bash -c "agentctl pool drain 2>&1 | grep -q 'removed ${#E[@]} pool entr'"
for e in "${E[@]}"; do check "nothing of entry $e is left" test -z "$(leftovers_of "$e")"; done
check "the pool is empty" test "$(agentctl pool -o json | json_field 'len(d["entries"])')" = 0

finish
