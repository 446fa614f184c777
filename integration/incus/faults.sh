#!/usr/bin/env bash
# A failed create leaves nothing behind, against the real Incus daemon
# (containers): each step of create fails in turn (AGENTCTL_FAULT=STEP, the
# hook agentctl's step reporter has for this test), and then agentctl is
# killed as each step begins (AGENTCTL_FAULT=kill:STEP). After a failure
# nothing agentctl made is left: no instance, bridge, network ACL, nft table,
# resolver, proxy or state directory (lib.sh: leftovers_of). After a kill the
# next create of the same name works, and delete then leaves nothing. And the
# refusals before anything is made: --memory 1B, --memory 4G.
#
# Usage: faults.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
F=itest-f-$TAG
require_incus "nftables, the Incus admin socket"

cleanup() {
  set +e
  agentctl delete --force "$F" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
config_set incus.subnetPool=10.222.0.0/16

create() { agentctl create "$F" --image "$IMAGE" --isolation container --mount-none --allow example.test:443 "$@"; }

# The steps of a create, as agentctl names them, in order.
STEPS=("creating network ACL" "creating bridge" "starting the resolver of" "starting the egress proxy of"
  "creating container" "creating user" "checking network confinement")
create >"$WORK/plain.out" 2>&1 || { cat "$WORK/plain.out"; bad "a create without faults"; finish; exit 1; }
for step in "${STEPS[@]}"; do
  grep -q "agentctl: $step" "$WORK/plain.out" || bad "create has no step \"$step\" any more: update the list"
done
agentctl delete --force "$F" >/dev/null 2>&1
check "delete leaves nothing: $(leftovers_of "$F" | tr '\n' ' ')" test -z "$(leftovers_of "$F")"

for step in "${STEPS[@]}"; do
  AGENTCTL_FAULT=$step create >"$WORK/fault.out" 2>&1; rc=$?
  check "create failing at \"$step\" exits 1 (got $rc)" test "$rc" = 1
  check "  with the step's failure" grep -q "injected fault at the step \"$step" "$WORK/fault.out"
  check "  and leaves nothing: $(leftovers_of "$F" | tr '\n' ' ')" test -z "$(leftovers_of "$F")"

  AGENTCTL_FAULT=kill:$step create >"$WORK/kill.out" 2>&1; rc=$?
  check "create killed at \"$step\" (exit $rc)" test "$rc" = 137
  create >"$WORK/again.out" 2>&1; rc=$?
  [ "$rc" = 0 ] || cat "$WORK/again.out"
  check "  the next create of the name works (exit $rc)" test "$rc" = 0
  agentctl delete --force "$F" >/dev/null 2>&1
  check "  and delete then leaves nothing: $(leftovers_of "$F" | tr '\n' ' ')" test -z "$(leftovers_of "$F")"
done

# ---------------------------------------------------------------- refused before anything is made
err=$(create --memory 1B 2>&1); rc=$?
check "--memory 1B is refused (exit $rc)" test "$rc" = 1
check "  clearly: $err" grep -q 'invalid --memory "1B": at least 64MiB: a sandbox cannot boot with less' <<<"$err"
check "  before anything is made: $(leftovers_of "$F" | tr '\n' ' ')" test -z "$(leftovers_of "$F")"
err=$(create --memory 4G 2>&1); rc=$?
check "--memory 4G is refused with a did-you-mean (exit $rc)" grep -q 'did you mean 4GiB?' <<<"$err"

# ---------------------------------------------------------------- --preview refuses what create refuses
# same_refusal WHAT ARGS...: create and --preview create with ARGS give the same exit code and error.
same_refusal() {
  local what=$1 real preview rc_real rc_preview
  shift
  # (The exit codes are agentctl's own: taken before the warnings are filtered out.)
  real=$(agentctl create "$F" --mount-none "$@" 2>&1 >/dev/null); rc_real=$?
  preview=$(agentctl --preview create "$F" --mount-none "$@" 2>&1 >/dev/null); rc_preview=$?
  real=$(grep -v 'WARNING' <<<"$real") preview=$(grep -v 'WARNING' <<<"$preview")
  check "$what: --preview exits as create does ($rc_preview, $rc_real)" test "$rc_real" != 0 -a "$rc_preview" = "$rc_real"
  check "  with the same error: $preview" test -n "$real" -a "$preview" = "$real"
}
same_refusal "a missing image" --image "itest-no-such-image-$TAG" --isolation container
if ! incus info | grep -q 'driver:.*qemu'; then
  same_refusal "a VM on a host without Incus VMs" --image "$IMAGE" --isolation vm
fi
check "  and nothing was made: $(leftovers_of "$F" | tr '\n' ' ')" test -z "$(leftovers_of "$F")"

finish
