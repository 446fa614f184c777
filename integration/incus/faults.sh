#!/usr/bin/env bash
# A failed create leaves nothing behind, against the real Incus daemon
# (containers): each step of create fails in turn (AGENTCTL_FAULT=STEP, the
# hook agentctl's step reporter has for this test), and then agentctl is
# killed as each step begins (AGENTCTL_FAULT=kill:STEP). After a failure
# nothing agentctl made is left: no instance, bridge, network ACL, nft table,
# resolver, proxy or state directory (lib.sh: leftovers_of). After a kill the
# next create of the same name works, and delete then leaves nothing. And the
# refusals before anything is made: --memory 1B, --memory 4G, and a sandbox
# user that cannot get the writable mount's uid, with --preview refusing the
# same.
#
# Usage: faults.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
F=itest-f-$TAG
require_incus "nftables, the Incus admin socket"

BASE=itest-uidbase-$TAG CLASH=itest-uidclash-$TAG
cleanup() {
  set +e
  agentctl delete --force "$F" >/dev/null 2>&1
  incus delete --force "$BASE" >/dev/null 2>&1
  incus image delete "$BASE" "$CLASH" >/dev/null 2>&1
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

# ---------------------------------------------------------------- a uid clash
# An image in which another user has the uid of the writable mount's owner
# (1000): the sandbox user (agentctl's, at 1500) cannot be moved there, and the
# mount could only be mapped to the other user. `image build` records the
# image's accounts; create refuses before it makes anything, and --preview
# says the same. The base: agentctl's image with a user `dev` at 1000 added.
OWNED=$WORK/owned
install -d -o 1000 -g 1000 "$OWNED"
incus init -q "$IMAGE" "$BASE" >/dev/null &&
  incus file pull "$BASE/etc/passwd" "$WORK/passwd" && incus file pull "$BASE/etc/group" "$WORK/group" &&
  echo "dev:x:1000:1000::/home/dev:/bin/sh" >>"$WORK/passwd" && echo "dev:x:1000:" >>"$WORK/group" &&
  incus file push -q "$WORK/passwd" "$BASE/etc/passwd" && incus file push -q "$WORK/group" "$BASE/etc/group" &&
  incus publish -q "$BASE" --alias "$BASE" >/dev/null && incus delete --force "$BASE" >/dev/null ||
  bad "cannot make the base image $BASE"
# A build that cannot record the accounts fails and takes its image back; the
# next build of the same alias then starts afresh.
err=$(AGENTCTL_FAULT="recording the accounts" agentctl image build "$CLASH" --base "$BASE" 2>&1); rc=$?
check "an image build whose accounts cannot be recorded fails (exit $rc)" test "$rc" = 1
check "  saying the image was removed: $(tail -n 2 <<<"$err" | tr '\n' ' ')" \
  grep -q "recording the accounts on image $CLASH failed, and the image was removed" <<<"$err"
check "  and the image is gone" bash -c "! incus image info '$CLASH' >/dev/null 2>&1"
agentctl image build "$CLASH" --base "$BASE" >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out"; bad "image build $CLASH"; }
check "image build records the image's accounts (dev at 1000)" \
  bash -c "incus image get-property '$CLASH' agentctl.passwd | grep -qx 'dev:x:1000:1000::/home/dev:/bin/sh'"
check "  as the accounts of that image (its fingerprint)" \
  test "$(incus image get-property "$CLASH" agentctl.accounts.of)" = \
  "$(incus image info "$CLASH" | awk '/^Fingerprint:/ {print $2}')"
real=$(agentctl create "$F" --image "$CLASH" --isolation container --mount-only --mount "$OWNED:/w:w" 2>&1 >/dev/null); rc_real=$?
preview=$(agentctl --preview create "$F" --image "$CLASH" --isolation container --mount-only --mount "$OWNED:/w:w" \
  2>&1 >/dev/null); rc_preview=$?
real=$(grep -v 'WARNING' <<<"$real") preview=$(grep -v 'WARNING' <<<"$preview")
check "a uid clash is refused (exit $rc_real)" test "$rc_real" = 1
check "  naming the user, its uid and the mount's: $real" \
  grep -q "the sandbox user agent has uid 1500 gid 1500 in $F, but the writable mounts are mapped to uid 1000" <<<"$real"
check "  before anything is made" bash -c "! grep -q 'creating' <<<'$real'"
check "  and nothing was made: $(leftovers_of "$F" | tr '\n' ' ')" test -z "$(leftovers_of "$F")"
check "--preview refuses it the same (exit $rc_preview): $preview" test "$rc_preview" = 1 -a "$preview" = "$real"
# An image that does not record its accounts (published by incus itself): the
# preview says it cannot tell, and create finds the clash once the user exists.
out=$(agentctl --preview create "$F" --image "$BASE" --isolation container --mount-only --mount "$OWNED:/w:w" 2>&1 >/dev/null); rc=$?
check "a preview with an image without accounts exits 0 ($rc)" test "$rc" = 0
check "  and says it cannot tell the user's uid" grep -q "does not record its accounts" <<<"$out"
out=$(agentctl create "$F" --image "$BASE" --isolation container --mount-only --mount "$OWNED:/w:w" 2>&1); rc=$?
check "create with it is refused once the user exists (exit $rc)" test "$rc" = 1
check "  with the same error" grep -q "the sandbox user agent has uid 1500 gid 1500 in $F, but the writable mounts" <<<"$out"
check "  and leaves nothing: $(leftovers_of "$F" | tr '\n' ' ')" test -z "$(leftovers_of "$F")"

finish
