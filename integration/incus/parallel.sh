#!/usr/bin/env bash
# The parallel suite: many agentctl commands at once on different sandboxes of
# one host all succeed, and nothing is left behind. After N creates at once,
# each of 3 rounds starts N creates and the N deletes of the previous round's
# sandboxes at the same moment, while another sandbox is stopped, started and
# given a new policy alongside. Every command must exit 0; every deleted
# sandbox must have left nothing, in Incus (instance, bridge, network ACL) or
# on the host (nft table, cgroup directories, state directory, processes:
# lib.sh leftovers_of); the sandboxes alive must hold subnets and host uids of
# their own. Last, deletes killed or failed at a step are finished by the next
# delete.
#
# Usage: parallel.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
# AGENTCTL_PARALLEL: sandboxes created and deleted per round (default 16).
set -uo pipefail

AGENTCTL=${1:?usage: parallel.sh AGENTCTL_BINARY}
IMAGE=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
N=${AGENTCTL_PARALLEL:-16}
ROUNDS=3
TAG=$$
PREFIX=itest-par-$TAG
KEEP=$PREFIX-keep
WORK=$(mktemp -d /tmp/agentctl-incus-parallel.XXXXXX)
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config XDG_STATE_HOME=$WORK/home/.local/state
mkdir -p "$HOME" "$WORK/logs"

. "$(dirname "$0")/lib.sh"
require_incus "the Incus admin socket, nft tables, cgroups"

# suite_sandboxes: every sandbox of this suite (any run) in this project that
# has an instance, a bridge or a network ACL.
suite_sandboxes() {
  {
    incus list -f csv -c n
    for kind in "network list" "network acl list"; do
      # shellcheck disable=SC2086
      incus $kind --project default -f json | python3 -c '
import json, sys
for piece in json.load(sys.stdin):
    config = piece.get("config", {})
    if config.get("user.agentctl.project", "") == sys.argv[1]: print(config.get("user.agentctl.sandbox", ""))' \
        "${INCUS_PROJECT:-}"
    done
  } | grep -E '^itest-par-[0-9]+-' | sort -u
}

cleanup() {
  set +e
  for name in $(suite_sandboxes | grep -F -- "$PREFIX-"); do agentctl delete --force "$name" >/dev/null 2>&1; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# What a killed run of this suite left (named after its pid, which is gone).
for name in $(suite_sandboxes); do
  pid=${name#itest-par-}
  pid=${pid%%-*}
  kill -0 "$pid" 2>/dev/null && continue
  agentctl delete --force "$name" >/dev/null 2>&1 && echo "# removed $name, left by a run of this suite that was killed"
done
"$AGENTCTL" config set incus.subnetPool=10.228.0.0/16 >/dev/null || { echo "cannot set incus.subnetPool"; exit 1; }

# launch LOG ARGS...: `agentctl ARGS` in the background, its output in LOG and
# its exit status in LOG.rc.
launch() {
  local log=$1
  shift
  { agentctl "$@" >"$log" 2>&1; echo $? >"$log.rc"; } &
}
create_args=(--image "$IMAGE" --isolation container --mount-none)
# failed_commands GLOB: the logs (with their last lines) of the commands whose
# status is not 0; nothing when every one succeeded.
failed_commands() {
  local rc
  for rc in $1.rc; do
    [ -e "$rc" ] || { echo "no status: ${rc%.rc}"; continue; }
    [ "$(cat "$rc")" = 0 ] && continue
    echo "${rc%.rc} (exit $(cat "$rc")): $(tail -n 2 "${rc%.rc}" | tr '\n' ' ')"
  done
}
# no_leftovers ROUND: what the sandboxes of ROUND left; nothing when all is gone.
leftovers_of_round() {
  local i
  for i in $(seq "$N"); do leftovers_of "$PREFIX-$1-$i"; done
}
# running_of ROUND: how many sandboxes of ROUND run.
running_of() { incus list -f csv -c ns | grep -c "^$PREFIX-$1-[0-9]*,RUNNING$"; }
# Every agentctl bridge of this run: distinct subnets and distinct host uids.
own_subnets_and_uids() {
  incus network list --project default -f json | python3 -c '
import json, sys
mine = [n["config"] for n in json.load(sys.stdin)
        if n.get("config", {}).get("user.agentctl.sandbox", "").startswith(sys.argv[1])]
subnets = [c.get("ipv4.address") for c in mine]
uids = [c.get("user.agentctl.host.uid") for c in mine]
sys.exit(not (len(mine) == int(sys.argv[2]) and len(set(subnets)) == len(mine) and len(set(uids)) == len(mine)
              and None not in uids))' "$PREFIX-" "$1"
}
seconds_since() { python3 -c 'import sys, time; print("%.1f" % (time.time() - float(sys.argv[1])))' "$1"; }

# ---------------------------------------------------------------- N creates at once
began=$(date +%s.%N)
for i in $(seq "$N"); do launch "$WORK/logs/r0-create-$i" create "$PREFIX-0-$i" "${create_args[@]}"; done
launch "$WORK/logs/r0-create-keep" create "$KEEP" "${create_args[@]}"
wait
took=$(seconds_since "$began")
echo "# $((N + 1)) creates at once: ${took} s"
failed=$(failed_commands "$WORK/logs/r0-*")
check "$N creates (and one more) at once all succeed${failed:+: $failed}" test -z "$failed"
check "  and all $N run" test "$(running_of 0)" = "$N"
check "  each with a subnet and a host uid of its own" own_subnets_and_uids $((N + 1))

# ---------------------------------------------------------------- rounds: N creates and N deletes at once
for r in $(seq "$ROUNDS"); do
  began=$(date +%s.%N)
  for i in $(seq "$N"); do
    launch "$WORK/logs/r$r-create-$i" create "$PREFIX-$r-$i" "${create_args[@]}"
    launch "$WORK/logs/r$r-delete-$i" delete --force "$PREFIX-$((r - 1))-$i"
  done
  { agentctl stop "$KEEP" && agentctl start "$KEEP" && agentctl policy add "$KEEP" "11.213.78.$r:443"; } \
    >"$WORK/logs/r$r-keep" 2>&1
  echo $? >"$WORK/logs/r$r-keep.rc"
  wait
  took=$(seconds_since "$began")
  echo "# round $r: $N creates and $N deletes at once (and stop, start, policy add of $KEEP): ${took} s"
  failed=$(failed_commands "$WORK/logs/r$r-*")
  check "round $r: $N creates, $N deletes, stop, start and policy add at once all succeed${failed:+: $failed}" \
    test -z "$failed"
  left=$(leftovers_of_round $((r - 1)))
  check "round $r: the $N deleted sandboxes left nothing${left:+: $(tr '\n' ' ' <<<"$left")}" test -z "$left"
  check "round $r: the $N created sandboxes run" test "$(running_of "$r")" = "$N"
  check "round $r: each sandbox has a subnet and a host uid of its own" own_subnets_and_uids $((N + 1))
  check "round $r: the policy added meanwhile is in force" \
    bash -c "agentctl policy check '$KEEP' 11.213.78.$r:443 >/dev/null"
done

# ---------------------------------------------------------------- deletes killed or failed at a step, then finished
# Three of the last round's deletes are interrupted (the rest run at the same
# moment): killed as the bridge is about to go (the instance and the host
# processes are gone already), killed as the ACL is about to go (the bridge,
# nft table and state are gone), failed as the bridge is about to go (the rest
# of the host's pieces go anyway; the ACL stays, the bridge still uses it).
last=$ROUNDS
began=$(date +%s.%N)
# fault_launch FAULT LOG ARGS...: launch with AGENTCTL_FAULT=FAULT (reporter.cpp).
fault_launch() { (export AGENTCTL_FAULT=$1; shift; launch "$@"; wait); }
fault_launch "kill:deleting bridge" "$WORK/logs/end-killed-bridge" delete --force "$PREFIX-$last-1" &
fault_launch "kill:deleting network ACL" "$WORK/logs/end-killed-acl" delete --force "$PREFIX-$last-2" &
fault_launch "deleting bridge" "$WORK/logs/end-failed-bridge" delete --force "$PREFIX-$last-3" &
for i in $(seq 4 "$N"); do launch "$WORK/logs/end-delete-$i" delete --force "$PREFIX-$last-$i"; done
launch "$WORK/logs/end-delete-keep" delete --force "$KEEP"
wait
echo "# $((N + 1)) deletes at once: $(seconds_since "$began") s"
failed=$(failed_commands "$WORK/logs/end-delete-*")
check "the other deletes at once all succeed${failed:+: $failed}" test -z "$failed"
check "a delete killed as the bridge was about to go left its bridge" \
  grep -q '^bridge ' <<<"$(leftovers_of "$PREFIX-$last-1")"
check "a delete killed as the ACL was about to go left its ACL" \
  grep -q '^network ACL ' <<<"$(leftovers_of "$PREFIX-$last-2")"
failed_bridge=$(leftovers_of "$PREFIX-$last-3")
check "a delete failed at the bridge exits 1 ($(cat "$WORK/logs/end-failed-bridge.rc"))" \
  test "$(cat "$WORK/logs/end-failed-bridge.rc")" = 1
check "  and left only the bridge and the ACL it uses: $(tr '\n' ' ' <<<"$failed_bridge")" \
  test "$(cut -d' ' -f1 <<<"$failed_bridge" | sort | tr '\n' ' ')" = "bridge network "
for i in 1 2 3; do launch "$WORK/logs/again-delete-$i" delete "$PREFIX-$last-$i"; done
wait
failed=$(failed_commands "$WORK/logs/again-delete-*")
check "the next delete of each finishes it${failed:+: $failed}" test -z "$failed"
left=$(leftovers_of_round "$last"; leftovers_of "$KEEP")
check "nothing of any sandbox of the suite is left${left:+: $(tr '\n' ' ' <<<"$left")}" test -z "$left"
check "no sandbox, bridge or ACL of this run is left in Incus" test -z "$(suite_sandboxes | grep -F -- "$PREFIX-")"
finish
