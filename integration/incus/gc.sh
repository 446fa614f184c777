#!/usr/bin/env bash
# agentctl gc against the real Incus daemon: it finds exactly what agentctl
# made whose sandbox is gone, and removes exactly that. The leftovers are made
# for real: a sandbox whose instance is deleted behind agentctl's back with
# the incus client (its bridge, ACL, nft table, proxy, resolver, state and
# cgroup stay), a create killed as it creates the user (its unfinished
# instance stays too), and a create killed as it creates the container, whose
# name another agentctl then holds (gc must leave it alone). Beside them: a
# sandbox that lives, a create that runs while gc runs, and a network ACL and
# an nft table of the user's. On the host: a kernel bridge named like
# agentctl's that Incus does not have (what a delete that failed inside
# Incus's teardown leaves) is removed; an interface of that name that is not
# a bridge is not.
# `gc --preview` lists exactly the leftovers and changes nothing; `gc` removes
# them (exit 0), leaves everything else as it was, and a second gc, once the
# name is free, removes the last one.
#
# Usage: gc.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
P=itest-gc-$TAG
LIVE=$P-live GONE=$P-gone KILLED=$P-killed HELD=$P-held RACE=$P-race
USER_ACL=itest-gc-user-$TAG USER_TABLE=itestgcuser$TAG
STRAY=agc-gcb$TAG NOT_BRIDGE=agc-gcd$TAG NOT_BRIDGE_PEER=agc-gce$TAG  # kernel interfaces only
require_incus "the Incus admin socket, nft tables, cgroups"

cleanup() {
  set +e
  [ -n "${HOLDER:-}" ] && kill "$HOLDER" 2>/dev/null
  for name in "$LIVE" "$GONE" "$KILLED" "$HELD" "$RACE"; do agentctl delete --force "$name" >/dev/null 2>&1; done
  incus network acl delete "$USER_ACL" >/dev/null 2>&1
  nft delete table inet "$USER_TABLE" >/dev/null 2>&1
  ip link delete "$STRAY" >/dev/null 2>&1
  ip link delete "$NOT_BRIDGE" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
config_set incus.subnetPool=10.223.0.0/16

create() { agentctl create "$1" --image "$IMAGE" --isolation container --mount-none --allow example.test:443; }

# What gc's JSON says, one "SANDBOX KIND" line per piece of this run, sorted.
pieces_of_run() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
rows = d["result"] if isinstance(d, dict) else d
for r in rows:
    if r["sandbox"].startswith(sys.argv[1]): print(r["sandbox"], r["kind"], "removed" if r.get("removed") else "")' "$P-" |
    sort
}
# Everything of the host and Incus gc could touch, as text (before/after).
host_and_incus() {
  incus list -f csv -c ns
  incus network list --project default -f csv -c n
  incus network acl list --project default -f csv
  nft list tables
  ls "$XDG_STATE_HOME/agentctl/incus" 2>/dev/null
  ls /sys/fs/cgroup/agentctl /sys/fs/cgroup/memory/agentctl 2>/dev/null
  ls /sys/class/net
  pgrep -f "egress-proxy|dnsmasq" | sort
}

# ---------------------------------------------------------------- the leftovers, made for real
for name in "$LIVE" "$GONE"; do
  create "$name" >"$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; bad "create $name"; finish; exit 1; }
done
incus delete --force "$GONE" >/dev/null || bad "incus delete $GONE behind agentctl's back"
AGENTCTL_FAULT="kill:creating user" create "$KILLED" >/dev/null 2>&1
AGENTCTL_FAULT="kill:creating container" create "$HELD" >/dev/null 2>&1
check "the killed create of $KILLED left its unfinished instance" incus info "$KILLED"
# Another agentctl holds $HELD's name (as a create or delete of it would).
mkfifo "$WORK/release"
(
  flock 9
  touch "$WORK/held"
  read -r _ <"$WORK/release"
) 9>"/run/lock/agentctl-incus-sandbox-$HELD.lock" &
HOLDER=$!
wait_until 30 test -e "$WORK/held" || bad "the lock of $HELD was not taken"
incus network acl create "$USER_ACL" >/dev/null || bad "create the user's ACL"
nft add table inet "$USER_TABLE" || bad "create the user's nft table"
ip link add "$STRAY" type bridge || bad "create a stray kernel bridge"
ip link add "$NOT_BRIDGE" type veth peer name "$NOT_BRIDGE_PEER" || bad "create an interface named like a bridge"
# gc's JSON row for one host interface: "KIND removed" or "KIND ", nothing when not listed.
interface_row() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
for r in d["result"] if isinstance(d, dict) else d:
    if r["name"] == sys.argv[1]: print(r["kind"], "removed" if r.get("removed") else "")' "$1"
}

# ---------------------------------------------------------------- gc --preview: exactly the leftovers, nothing changed
before=$(host_and_incus)
agentctl --preview gc --output json >"$WORK/preview.json" 2>"$WORK/preview.err"
check "gc --preview exits 0 ($?)" test $? = 0
found=$(pieces_of_run <"$WORK/preview.json")
expected=$(
  for kind in bridge "network ACL" "nft table" "egress proxy" resolver "state directory" cgroup; do
    echo "$GONE $kind "
    echo "$KILLED $kind "
  done
  echo "$KILLED instance "
) 
expected=$(sort <<<"$expected")
check "gc --preview lists exactly the leftovers of $GONE and $KILLED: $(tr '\n' ';' <<<"$found")" \
  test "$found" = "$expected"
check "gc --preview lists the stray kernel bridge $STRAY" \
  test "$(interface_row "$STRAY" <"$WORK/preview.json")" = "bridge interface "
check "  and not $NOT_BRIDGE, which is not a bridge" test -z "$(interface_row "$NOT_BRIDGE" <"$WORK/preview.json")"
check "gc --preview says it left $HELD alone (another agentctl holds it)" grep -q "left $HELD alone" "$WORK/preview.err"
after=$(host_and_incus)
check "gc --preview changed nothing in Incus or on the host" test "$before" = "$after"

# ---------------------------------------------------------------- gc: removes exactly them, while a create runs
gone_before=$(leftovers_of "$GONE"; leftovers_of "$KILLED")
check "  (the leftovers exist: $(wc -l <<<"$gone_before") pieces)" test -n "$gone_before"
{ create "$RACE" >"$WORK/race.out" 2>&1; echo $? >"$WORK/race.rc"; } &
race=$!
# gc runs once the racing create has made its bridge and before it finished.
wait_until 120 bash -c "incus network list --project default -f json | grep -q '\"user.agentctl.sandbox\":\"$RACE\"'" ||
  bad "the racing create made no bridge"
agentctl gc --output json >"$WORK/gc.json" 2>"$WORK/gc.err"
rc=$?
wait "$race"
check "gc exits 0 when everything went ($rc): $(tail -n 3 "$WORK/gc.err" | tr '\n' ' ')" test "$rc" = 0
removed=$(pieces_of_run <"$WORK/gc.json")
check "gc removed exactly the leftovers: $(tr '\n' ';' <<<"$removed")" \
  test "$removed" = "$(sed 's/ $/ removed/' <<<"$expected")"
left=$(leftovers_of "$GONE"; leftovers_of "$KILLED")
check "nothing of $GONE and $KILLED is left${left:+: $(tr '\n' ' ' <<<"$left")}" test -z "$left"
check "the create that ran meanwhile succeeded: $(tail -n 2 "$WORK/race.out" | tr '\n' ' ')" \
  test "$(cat "$WORK/race.rc")" = 0
for name in "$LIVE" "$RACE"; do
  check "$name still works (exec)" agentctl exec "$name" -- true
  check "  and its proxy and resolver still run" \
    test "$(agentctl status "$name" --output json | grep -c '"pid": [1-9]')" -ge 2
done
held_left=$(leftovers_of "$HELD")
check "$HELD's leftovers were left alone: $(head -n 2 <<<"$held_left" | tr '\n' ' ')" grep -q '^bridge ' <<<"$held_left"
check "the user's network ACL is untouched" bash -c "incus network acl show '$USER_ACL' >/dev/null"
check "the user's nft table is untouched" bash -c "nft list table inet '$USER_TABLE' >/dev/null"
check "gc removed the stray kernel bridge $STRAY" \
  test "$(interface_row "$STRAY" <"$WORK/gc.json")" = "bridge interface removed"
check "  which is gone from the host" test ! -e "/sys/class/net/$STRAY"
check "  and left $NOT_BRIDGE, which is not a bridge" test -e "/sys/class/net/$NOT_BRIDGE"

# ---------------------------------------------------------------- once the name is free
echo >"$WORK/release"
wait "$HOLDER"
HOLDER=
agentctl gc >"$WORK/gc2.out" 2>&1
check "the next gc exits 0 ($?)" test $? = 0
check "  and removes $HELD's leftovers: $(leftovers_of "$HELD" | tr '\n' ' ')" test -z "$(leftovers_of "$HELD")"
check "  and nothing of $LIVE and $RACE" agentctl exec "$LIVE" -- true
agentctl --preview gc --output json >"$WORK/preview2.json" 2>/dev/null
check "gc --preview then finds nothing of this run" test -z "$(pieces_of_run <"$WORK/preview2.json")"
finish
