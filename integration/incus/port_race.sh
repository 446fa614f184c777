#!/usr/bin/env bash
# Two creates at once that publish the same host port: one gets it, the other
# is refused at once with agentctl's own message naming the port (not Incus's
# "Failed to receive fd from listener process" seconds into its start), and
# leaves nothing behind. Run twice, the second time with the two sandboxes
# publishing the port on different addresses (127.0.0.1 and 0.0.0.0 clash too).
#
# Usage: port_race.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
P=itest-port-$TAG
require_incus "nftables, the Incus admin socket"

cleanup() {
  set +e
  for name in "$P"-{1,2}-{a,b}; do agentctl delete --force "$name" >/dev/null 2>&1; done
  rm -rf "$WORK"
}
trap cleanup EXIT
config_set incus.subnetPool=10.225.0.0/16

# A host port nothing listens on now (bound and released by the kernel's choice).
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("0.0.0.0", 0)); print(s.getsockname()[1])')
args=(--image "$IMAGE" --isolation container --mount-none --no-network-policy)

for round in 1 2; do
  second_address=127.0.0.1
  [ "$round" = 2 ] && second_address=0.0.0.0
  { agentctl create "$P-$round-a" "${args[@]}" --port "127.0.0.1:$PORT:80" >"$WORK/$round-a.out" 2>&1
    echo $? >"$WORK/$round-a.rc"; } &
  { agentctl create "$P-$round-b" "${args[@]}" --port "$second_address:$PORT:80" >"$WORK/$round-b.out" 2>&1
    echo $? >"$WORK/$round-b.rc"; } &
  wait
  codes="$(cat "$WORK/$round-a.rc") $(cat "$WORK/$round-b.rc")"
  check "round $round: of two creates publishing port $PORT at once, one succeeds and one fails ($codes)" \
    bash -c "[ '$codes' = '0 1' ] || [ '$codes' = '1 0' ]"
  loser=a
  [ "$(cat "$WORK/$round-a.rc")" = 0 ] && loser=b
  check "  the other says the port is in use: $(grep 'agentctl:' "$WORK/$round-$loser.out" | tail -n 1)" \
    grep -q "cannot publish .*:$PORT/tcp: the port is already in use on this host" "$WORK/$round-$loser.out"
  left=$(leftovers_of "$P-$round-$loser")
  check "  and leaves nothing${left:+: $(tr '\n' ' ' <<<"$left")}" test -z "$left"
  for name in "$P-$round-a" "$P-$round-b"; do agentctl delete --force "$name" >/dev/null 2>&1; done
done
finish
