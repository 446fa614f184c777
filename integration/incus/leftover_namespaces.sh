#!/usr/bin/env bash
# lib.sh's remove_leftover_namespaces, on namespaces of this test's own: the
# one a killed run left (named after a pid that is gone, with a process still
# inside and the host end of its veth holding a test subnet) is removed with
# everything in it; the one of a run that is still going is kept.
#
# Usage: leftover_namespaces.sh     (exit 77 = skipped, with the reason printed)
set -uo pipefail
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
ip netns add "agltprobe$$" 2>/dev/null || skip "cannot create a network namespace here"
ip netns del "agltprobe$$"
. "$(dirname "$0")/lib.sh"

sh -c 'exit 0' &
gone=$!
wait "$gone"
DEAD=aglt$gone LIVE=aglt$$
NET=11.214.$(($$ % 250 + 1))  # this test's own, on no other link (checked)
ip -o addr show | grep -q " $NET\." && skip "$NET.0/24 is already in use here"
cleanup() {
  for pid in $gone $$; do
    ip netns pids "aglt$pid" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "aglt$pid" 2>/dev/null
    ip link del "aglt${pid}h" 2>/dev/null
  done
}
trap cleanup EXIT
for pid in $gone $$; do
  ip netns add "aglt$pid"
  ip link add "aglt${pid}h" type veth peer name "aglt${pid}n"
  ip link set "aglt${pid}n" netns "aglt$pid"
  ip link set "aglt${pid}h" up
done
ip addr add "$NET.1/24" dev "aglt${gone}h"
ip netns exec "$DEAD" sleep 300 &
inside=$!
disown "$inside"  # its end is the point: no "Killed" notice

out=$(remove_leftover_namespaces aglt aglt)
echo "$out" | sed 's/^/    /'
ip netns list | awk '{print $1}' | grep -qx "$DEAD" && bad "the dead run's namespace is still there" \
  || ok "the dead run's namespace is removed"
ip link show "aglt${gone}h" >/dev/null 2>&1 && bad "its veth is still there" || ok "its veth is removed"
ip -o addr show | grep -q " $NET\.1/" && bad "its test subnet is still on a link" || ok "its test subnet is free again"
sleep 0.2
kill -0 "$inside" 2>/dev/null && bad "the process inside it still runs" || ok "the process inside it is stopped"
echo "$out" | grep -q "removed $DEAD, left by a run of this suite that was killed (pid $gone)" \
  && ok "it says what it removed" || bad "it did not say what it removed"
ip netns list | awk '{print $1}' | grep -qx "$LIVE" && ok "a running suite's namespace is kept" \
  || bad "a running suite's namespace was removed"
finish
