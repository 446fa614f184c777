#!/usr/bin/env bash
# Several sandboxes in one create, against the real Incus daemon:
# `create A B C` where B fails as its container is created (AGENTCTL_FAULT
# names B's step only) makes A and C, reports each, exits 1 naming B, and
# leaves nothing of B; `create --count 2 P` makes P-1 and P-2; a name given
# twice, and --count with two names, are refused before anything is made.
# `list` asks Incus once, without every instance's state, with 2 sandboxes as
# with 4, and shows each one's address as status does.
#
# Usage: create_many.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
P=itest-many-$TAG
A=$P-a B=$P-b C=$P-c
require_incus "nftables, the Incus admin socket"

cleanup() {
  set +e
  for name in "$A" "$B" "$C" "$P-n-1" "$P-n-2"; do agentctl delete --force "$name" >/dev/null 2>&1; done
  rm -rf "$WORK"
}
trap cleanup EXIT
config_set incus.subnetPool=10.224.0.0/16

args=(--image "$IMAGE" --isolation container --mount-none --allow example.test:443)
running() { [ "$(incus list -f csv -c s "^$1\$")" = RUNNING ]; }
# The Incus requests `list` makes (from -v), without their times.
list_requests() { agentctl -v list 2>&1 >/dev/null | sed -n 's/.*\(incus [A-Z]* [^ ]*\) .*/\1/p'; }
# NAME's addresses as `list -o json` shows them, and as `status -o json` does.
ips_listed() { agentctl list -o json | json_field "[i['ips'] for i in d if i['name'] == '$1'][0]"; }
ips_status() { agentctl status "$1" -o json | json_field "d['ips']"; }

AGENTCTL_FAULT="creating container $B " agentctl create "$A" "$B" "$C" "${args[@]}" >"$WORK/abc.out" 2>&1
rc=$?
check "create A B C with B failing exits 1 ($rc)" test "$rc" = 1
check "  A runs" running "$A"
check "  C runs" running "$C"
check "  each is reported as created" \
  bash -c "grep -q 'created sandbox $A' '$WORK/abc.out' && grep -q 'created sandbox $C' '$WORK/abc.out'"
check "  B's failure is reported with its name" grep -q "agentctl: $B: injected fault" "$WORK/abc.out"
check "  the last line names the one that failed" grep -q "agentctl: 1 of 3 failed: $B\$" "$WORK/abc.out"
left=$(leftovers_of "$B")
check "  nothing of B is left${left:+: $(tr '\n' ' ' <<<"$left")}" test -z "$left"
check "  A works" agentctl exec "$A" -- true
requests_2=$(list_requests)
check "list asks Incus once, for every instance without its state: $(tr '\n' ' ' <<<"$requests_2")" \
  test "$(grep -c . <<<"$requests_2")" = 1 -a "$(grep -c '^incus GET /1.0/instances?recursion=1' <<<"$requests_2")" = 1
check "  and shows A's address as status does ($(ips_listed "$A"))" \
  test "$(ips_listed "$A")" = "$(ips_status "$A")" -a "$(ips_listed "$A")" != "[]"

agentctl create --count 2 "$P-n" "${args[@]}" >"$WORK/count.out" 2>&1
rc=$?
check "create --count 2 exits 0 ($rc): $(tail -n 1 "$WORK/count.out")" test "$rc" = 0
check "  and makes $P-n-1, running" running "$P-n-1"
check "  and $P-n-2, running" running "$P-n-2"
check "list with 4 sandboxes makes the same request as with 2" test "$(list_requests)" = "$requests_2"

before=$(incus list -f csv -c n | sort)
agentctl create "$P-x" "$P-y" "$P-x" "${args[@]}" >"$WORK/twice.out" 2>&1
rc=$?
check "a name given twice is refused, exit 1 ($rc)" test "$rc" = 1
check "  saying so" grep -q "given twice" "$WORK/twice.out"
agentctl create --count 2 "$P-x" "$P-y" "${args[@]}" >"$WORK/count2.out" 2>&1
rc=$?
check "--count with two names is refused, exit 1 ($rc)" test "$rc" = 1
check "  saying so" grep -q "takes one name" "$WORK/count2.out"
check "  and neither made anything" test "$(incus list -f csv -c n | sort)" = "$before"
finish
