#!/usr/bin/env bash
# The Incus projects suite: agentctl works in one Incus project at a time
# (--project, incus.project, $INCUS_PROJECT), and a sandbox of one project is
# safe from commands given in another: Incus keeps every project's bridges and
# ACLs in the default project, so agentctl refuses a name another project's
# sandbox holds, and a delete in one project never takes another's bridge or
# ACL. Runs in the project the environment names (scripts/test.sh: the tests'
# own) plus a scratch project of its own, removed at the end.
#
# Usage: projects.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
A=itest-pj-a-$TAG
OTHER=itest-proj-$TAG   # the scratch project: no image, no instances
require_incus "the Incus admin socket"

cleanup() {
  set +e
  agentctl delete --force "$A" >/dev/null 2>&1
  incus project delete "$OTHER" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

# A scratch project a killed run of this suite left (named after its pid, gone).
for p in $(incus project list -f csv | cut -d, -f1 | sed 's/ (current)$//'); do
  pid=${p#itest-proj-}
  [[ "$p" != "$pid" && "$pid" =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null || continue
  for i in $(incus list --project "$p" -f csv -c n); do incus delete --force --project "$p" "$i"; done
  incus project delete "$p" && echo "# removed project $p, left by a run of this suite that was killed"
done
config_set incus.subnetPool=10.224.0.0/16
incus project create "$OTHER" -c features.images=true -c features.profiles=true >/dev/null ||
  { echo "cannot create the scratch project $OTHER"; exit 1; }
in_other() { agentctl --project "$OTHER" "$@"; }

agentctl create "$A" --image "$IMAGE" --isolation container --mount-none >"$WORK/create.out" 2>&1 &&
  ok "create $A" || { cat "$WORK/create.out"; bad "create $A"; finish; exit 1; }
BR=$(agentctl status "$A" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["extra"]["bridge"])')
here=${INCUS_PROJECT:-}
check "the bridge records the sandbox's project" test "$(incus network get "$BR" user.agentctl.project)" = "$here"
check "the ACL records it too" test "$(incus network acl get "agentctl-$A" user.agentctl.project)" = "$here"
if [ -n "$here" ]; then
  check "status names the project" bash -c \
    "agentctl status '$A' -o json | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)[\"extra\"][\"project\"] != \"$here\")'"
  check "list has a PROJECT column" bash -c "agentctl list | head -1 | grep -q PROJECT && agentctl list | grep -q '$A .* $here'"
fi

# ---------------------------------------------------------------- the same name in another project
out=$(in_other create "$A" --image "$IMAGE" --isolation container --mount-none 2>&1); rc=$?
check "create of a name another project's sandbox holds is refused (exit $rc)" test "$rc" = 1
check "the refusal names the project that holds it" grep -q "already exists in the Incus project ${here:-default}" <<<"$out"
check "nothing was made in the other project" test -z "$(incus list --project "$OTHER" -f csv -c n)"
out=$(in_other --preview create "$A" --image "$IMAGE" --isolation container --mount-none 2>&1); rc=$?
check "a preview says the same (exit $rc)" bash -c "[ $rc = 1 ] && grep -q 'already exists in the Incus project' <<<'$out'"
in_other delete --force "$A" >"$WORK/delete-other.out" 2>&1
check "a delete in the other project leaves the sandbox's bridge" incus network show "$BR"
check "and its ACL" incus network acl show "agentctl-$A"
check "and the sandbox still runs commands" test "$(agentctl exec "$A" -- echo still-here)" = still-here

# ---------------------------------------------------------------- a project that does not exist
out=$(agentctl --project "nosuch-$TAG" list 2>&1); rc=$?
check "list in a project that does not exist fails (exit $rc)" test "$rc" = 1
check "and says which project and what to do" bash -c \
  "grep -q 'the Incus project nosuch-$TAG does not exist' <<<'$out' && grep -q 'incus project create' <<<'$out'"
out=$(INCUS_PROJECT='bad/name' agentctl list 2>&1); rc=$?
check "a malformed \$INCUS_PROJECT is refused by name (exit $rc)" bash -c \
  "[ $rc != 0 ] && grep -q 'INCUS_PROJECT must be the name of an Incus project' <<<'$out'"

agentctl delete --force "$A" >/dev/null 2>&1
check "delete in the sandbox's own project removes its bridge" bash -c "! incus network show '$BR' >/dev/null 2>&1"
finish
