#!/usr/bin/env bash
# Containment suite: replays, against the real Incus daemon (containers), the
# attacks a hostile agent with root inside its sandbox would try on the host,
# and checks that each one fails:
#   - setuid-root files and chown to host root through a writable mount
#   - a mount swapped for a symlink between two starts (start, snapshot restore)
#   - a fork bomb (bounded replay: counts how many sleeps can be started)
#   - a port published on every interface without a warning
#   - a snapshot restore that brings a writable mount back unannounced
#   - exec output buffered in agentctl; the guest API; agents not on PATH
# Two sandboxes, one image. Everything made here is removed on exit.
#
# Usage: containment.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
# Environment: AGENTCTL_TEST_PREFIX (name prefix, default itest-cnt), AGENTCTL_TEST_POOL
# (the subnet pool for the sandboxes' bridges, default 10.219.0.0/16).
set -uo pipefail

AGENTCTL=${1:?usage: containment.sh AGENTCTL_BINARY}
IMAGE=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
PREFIX=${AGENTCTL_TEST_PREFIX:-itest-cnt}
POOL=${AGENTCTL_TEST_POOL:-10.219.0.0/16}
TAG=$$
A=$PREFIX-a-$TAG
B=$PREFIX-b-$TAG
R=$PREFIX-r-$TAG # only ever refused
OWNER=1000 # the host user who owns the writable mounts (not root, no account needed)
WORK=$(mktemp -d /tmp/agentctl-containment.XXXXXX)
chmod 755 "$WORK"
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config
mkdir -p "$HOME"

. "$(dirname "$0")/lib.sh"
require_incus "host-side ownership checks, and the Incus admin socket"
for f in /etc/subuid /etc/subgid; do
  [ ! -e $f ] || grep -q "^root:$OWNER:" $f ||
    skip "$f does not let root map uid $OWNER (scripts/incus/up.sh adds root:$OWNER:1)"
done

# A port free on every address, below the ephemeral range (a kernel-chosen port
# could be handed to an outgoing connection before the test binds it).
free_port() { python3 -c '
import random, socket
while True:
    p = random.randint(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()'; }

cleanup() {
  set +e
  for n in "$A" "$B" "$R"; do "$AGENTCTL" --provider incus delete --force "$n" >/dev/null 2>&1; done
  rm -rf "$WORK"
}
trap cleanup EXIT

agentctl config set "incus.subnetPool=$POOL" >/dev/null || { echo "cannot set incus.subnetPool"; exit 1; }

# ---------------------------------------------------------------- sandboxes
DIR=$WORK/shared RO=$WORK/ro
mkdir -p "$DIR" "$RO" "$HOME/.ssh"
echo original >"$RO/file"
echo "secret key" >"$HOME/.ssh/id_test"
chown "$OWNER:$OWNER" "$DIR"
install -d -o "$OWNER" -g "$OWNER" "$DIR/project"
P_ALL=$(free_port) P_LO=$(free_port) P_DEF=$(free_port)

agentctl create "$A" --image "$IMAGE" --isolation container --mount-only --mount "$DIR:/rw:w" --mount "$RO:/ro" \
  --port "0.0.0.0:$P_ALL:8080" --port "127.0.0.1:$P_LO:8081" --port "$P_DEF:8082" --processes 100 \
  >"$WORK/create-a.out" 2>&1 || { cat "$WORK/create-a.out"; bad "create $A"; agentctl start "$B" >"$WORK/start-b-again.out" 2>&1
check "start works again once the directory is a directory" \
  bash -c "[ \"\$(incus list '$B' -c s -f csv)\" = RUNNING ] && grep -q '$DIR/project -> /project (writable)' '$WORK/start-b-again.out'"
agentctl snapshot restore "$B" s1 >"$WORK/restore-running.out" 2>&1; rc=$?
check "restoring mounts into a running sandbox is refused (start checks them)" \
  bash -c "[ $rc = 1 ] && grep -q 'stop it first' '$WORK/restore-running.out'"

echo "# $PASS passed, $FAIL failed"; exit 1; }
ok "create $A"
agentctl create "$B" --image "$IMAGE" --isolation container --mount-only --mount "$DIR/project:/project:w" \
  >"$WORK/create-b.out" 2>&1 || { cat "$WORK/create-b.out"; bad "create $B"; agentctl start "$B" >"$WORK/start-b-again.out" 2>&1
check "start works again once the directory is a directory" \
  bash -c "[ \"\$(incus list '$B' -c s -f csv)\" = RUNNING ] && grep -q '$DIR/project -> /project (writable)' '$WORK/start-b-again.out'"
agentctl snapshot restore "$B" s1 >"$WORK/restore-running.out" 2>&1; rc=$?
check "restoring mounts into a running sandbox is refused (start checks them)" \
  bash -c "[ $rc = 1 ] && grep -q 'stop it first' '$WORK/restore-running.out'"

echo "# $PASS passed, $FAIL failed"; exit 1; }
ok "create $B"
agentctl status "$A" --output json >"$WORK/status-a.json" 2>/dev/null
agentctl status "$A" >"$WORK/status-a.txt" 2>/dev/null
jq_() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# ---------------------------------------------------------------- root inside owns nothing on the host
agentctl exec "$A" -- sudo -n install -o 0 -g 0 -m 4755 /bin/bash /rw/x
X_UID=$(stat -c %u "$DIR/x" 2>/dev/null || echo none)
BASE_A=$(incus config get "$A" volatile.idmap.base)
BASE_B=$(incus config get "$B" volatile.idmap.base)
check "setuid-root file planted inside is not owned by host root" test "$X_UID" != 0
check "its owner is the sandbox's own isolated range ($X_UID, base $BASE_A)" \
  bash -c "[ '${BASE_A:-0}' -ge 65536 ] && { [ '$X_UID' = none ] || { [ '$X_UID' -ge '$BASE_A' ] && [ '$X_UID' -lt \$(( $BASE_A + 65536 )) ]; }; }"
check "that uid is no host account" bash -c "[ '$X_UID' = none ] || ! getent passwd '$X_UID' >/dev/null"
check "each sandbox has its own uid range ($BASE_A, $BASE_B)" \
  bash -c "[ -n '$BASE_A' ] && [ -n '$BASE_B' ] && [ '$BASE_A' != '$BASE_B' ]"
agentctl exec "$A" -- sh -c 'echo mine >/rw/own'
check "files the sandbox user writes belong to the host owner" test "$(stat -c %u:%g "$DIR/own")" = "$OWNER:$OWNER"
agentctl exec "$A" -- sudo -n chown 0:0 /rw/own 2>/dev/null
check "root inside cannot chown a mount file to host root" test "$(stat -c %u "$DIR/own")" != 0
agentctl exec "$A" -- sudo -n chown 1:1 /rw/own 2>/dev/null
check "root inside cannot chown a mount file to another host uid" \
  bash -c "u=\$(stat -c %u '$DIR/own'); [ \$u != 0 ] && [ \$u != 1 ]"
check "read-only mount stays read-only for root inside" \
  bash -c "! '$AGENTCTL' --provider incus exec --root '$A' -- sh -c 'touch /ro/x || mount -o remount,rw /ro' 2>/dev/null && [ ! -e '$RO/x' ]"
ROOTFS=$(readlink -f "/var/lib/incus/containers/$(host_name "$A")")
check "the sandbox's root uid cannot write its rootfs from outside" \
  bash -c "! setpriv --reuid='$BASE_A' --regid='$BASE_A' --clear-groups touch '$ROOTFS/rootfs/etc/x' 2>/dev/null"
check "other host users cannot enter the sandbox's rootfs" \
  bash -c "! setpriv --reuid=$OWNER --regid=$OWNER --clear-groups ls '$ROOTFS/rootfs' >/dev/null 2>&1"

mkdir -p "$WORK/root-owned" "$WORK/other-owner"
chown 1500:1500 "$WORK/other-owner"
agentctl create "$R" --image "$IMAGE" --isolation container --mount-only --mount "$WORK/root-owned:/r:w" \
  >"$WORK/create-r.out" 2>&1; rc=$?
check "a writable mount owned by host root is refused" \
  bash -c "[ $rc = 1 ] && grep -q '$WORK/root-owned belongs to root' '$WORK/create-r.out'"
agentctl create "$R" --image "$IMAGE" --isolation container --mount-only --mount "$DIR/project:/p:w" \
  --mount "$WORK/other-owner:/o:w" >"$WORK/create-r2.out" 2>&1; rc=$?
check "writable mounts of two owners are refused" \
  bash -c "[ $rc = 1 ] && grep -q '$WORK/other-owner belongs to 1500:1500 but $DIR/project to $OWNER:$OWNER' '$WORK/create-r2.out'"
check "... and nothing was created for them" bash -c "! incus info '$R' >/dev/null 2>&1"

# ---------------------------------------------------------------- guest API, PATH, process limit
check "the guest API (/dev/incus) is absent for root inside" \
  bash -c "! '$AGENTCTL' --provider incus exec --root '$A' -- test -e /dev/incus"
agentctl exec "$A" -- sh -c 'mkdir -p ~/.local/bin && printf "#!/bin/sh\necho local-agent-ok\n" >~/.local/bin/fake-agent && chmod +x ~/.local/bin/fake-agent'
check "an agent in ~/.local/bin runs by name through exec" test "$(agentctl exec "$A" -- fake-agent 2>&1)" = local-agent-ok
check "... and in a login shell (what shell starts)" test "$(agentctl exec "$A" -- bash -lc fake-agent 2>&1)" = local-agent-ok
check "global npm installs go to the user's prefix" \
  test "$(agentctl exec "$A" -- sh -c 'echo $NPM_CONFIG_PREFIX')" = /home/agent/.npm-global
check "status shows the process limit" grep -q "processes: *100" "$WORK/status-a.txt"
check "incusd never starts the sandbox by itself (boot.autostart=false)" \
  test "$(incus config get "$A" boot.autostart)" = false
# Bounded fork-bomb replay: 150 sleeps under a limit of 100; the sleeps that
# started are counted from the host (the processes in the sandbox's cgroup).
in_sandbox() { grep -lE ":/lxc\.payload\.$(host_name "$A")(/|\$)" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3; }
# The loop ends by becoming `sleep 678` (exec needs no fork), or, when a fork
# fails at the limit, by its shell giving up: once either happened, every
# sleep that could start has started.
agentctl exec "$A" -- sh -c 'i=0; while [ $i -lt 150 ]; do sleep 677 & i=$((i+1)); done; exec sleep 678' >/dev/null 2>&1 &
bomb=$!
sleeping() { for p in $(in_sandbox); do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qx "sleep $1 " && echo "$p"; done; }
bomb_shell() { for p in $(in_sandbox); do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q '^sh -c i=0;' && echo "$p"; done; }
loop_done() { [ -n "$(sleeping 678)" ] || { [ -n "$(sleeping 677)" ] && [ -z "$(bomb_shell)" ]; }; }
check "the fork-bomb loop ran to its end" wait_until 120 loop_done
started=$(sleeping 677 | wc -l)
for p in $(sleeping 677) $(sleeping 678); do kill "$p" 2>/dev/null; done
wait "$bomb" 2>/dev/null
echo "# fork bomb replay: $started of 150 sleeps started under limits.processes=100"
check "a fork bomb is bounded by the process limit ($started of 150 sleeps ran)" \
  bash -c "[ '$started' -gt 0 ] && [ '$started' -lt 100 ]"

# ---------------------------------------------------------------- published ports
check "create warns about the port on every interface" grep -q "WARNING.*0.0.0.0:$P_ALL" "$WORK/create-a.out"
check "create does not warn about loopback ports" bash -c "! grep -q 'WARNING.*127.0.0.1:$P_LO' '$WORK/create-a.out'"
check "status lists every published port (text)" \
  bash -c "grep -q '0.0.0.0:$P_ALL -> 8080/tcp' '$WORK/status-a.txt' && grep -q '127.0.0.1:$P_LO -> 8081/tcp' '$WORK/status-a.txt' && grep -q '127.0.0.1:$P_DEF -> 8082/tcp' '$WORK/status-a.txt'"
check "status shows the non-loopback port as a warning (text)" grep -q "Warning: .*0.0.0.0:$P_ALL" "$WORK/status-a.txt"
check "status lists every published port (JSON)" \
  test "$(jq_ "$WORK/status-a.json" "sorted((p['listen_address'], p['host_port']) for p in d['ports'])")" = \
  "$(python3 -c "print(sorted([('0.0.0.0', $P_ALL), ('127.0.0.1', $P_LO), ('127.0.0.1', $P_DEF)]))")"
check "status shows the non-loopback port as a widening (JSON)" \
  test "$(jq_ "$WORK/status-a.json" "sum('0.0.0.0:$P_ALL' in w for w in d['widenings'])")" = 1
check "a port without an address binds loopback only" bash -c "ss -ltnH | grep -q '127.0.0.1:$P_DEF '"

# ---------------------------------------------------------------- exec streams, bounded memory
# Peak RSS (VmHWM, KiB) of agentctl and its children while `exec A -- $*`
# runs with stdout counted by wc; the byte count goes to $WORK/bytes. Under
# AddressSanitizer, freed buffers wait in its quarantine (256 MiB by default)
# before they are reused, and LeakSanitizer's scan when the process exits
# takes about 45 MiB more: the sanitizers' memory, not agentctl's (whether a
# sample caught the scan decided whether a run "grew"). The measured runs
# have neither.
peak_of_exec() {
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:detect_leaks=0" \
    "$AGENTCTL" --provider incus exec "$A" -- "$@" | wc -c >"$WORK/bytes" &
  local pipeline=$! peak=0 pid= kb p
  for _ in $(seq 50); do pid=$(pgrep -n -f -- "--provider incus exec $A -- $1") && break; sleep 0.05; done
  while kill -0 "$pipeline" 2>/dev/null; do
    for p in $pid $(pgrep -P "${pid:-1}" 2>/dev/null); do
      kb=$(awk '/^VmHWM/ {print $2}' /proc/"$p"/status 2>/dev/null)
      [ "${kb:-0}" -gt "$peak" ] && peak=$kb
    done
    sleep 0.1
  done
  wait "$pipeline"
  echo "$peak"
}
base=$(peak_of_exec sh -c 'sleep 1; echo small')
peak=$(peak_of_exec head -c 300000000 /dev/zero)
echo "# exec peak RSS (agentctl and its incus client): ${base} KiB for 6 bytes, ${peak} KiB for 300000000 bytes"
check "exec passes 300000000 bytes through complete" test "$(cat "$WORK/bytes")" = 300000000
check "agentctl's memory does not grow with the output (+$((peak - base)) KiB for 300 MB)" \
  test $((peak - base)) -lt 16384
# The command prints a line, then waits for a file that the test makes only
# once it has read that line (giving up after 60 s): held back until the
# command ends, the line would come too late and the command say so.
lines=$(agentctl exec "$A" -- sh -c 'echo first; i=0
    while [ ! -e /tmp/streamed ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    if [ -e /tmp/streamed ]; then echo second; else echo gave-up; fi' |
  { read -r line && echo "$line" && agentctl exec "$A" -- touch /tmp/streamed </dev/null && cat; })
check "exec output appears before the command ends" test "$(echo $lines)" = "first second"
agentctl exec "$A" -- sh -c 'echo out; echo err >&2; exit 9' >"$WORK/o" 2>"$WORK/e"; rc=$?
check "exit code passes through, stdout and stderr stay apart" \
  bash -c "[ $rc = 9 ] && [ \"\$(cat '$WORK/o')\" = out ] && [ \"\$(cat '$WORK/e')\" = err ]"

# ---------------------------------------------------------------- mount swapped for a symlink
agentctl stop "$B" >/dev/null 2>&1
agentctl snapshot create "$B" s1 >/dev/null 2>&1 || bad "snapshot create $B"
# Inside A, whose writable mount holds B's project directory: swap it for a link to ~/.ssh.
agentctl exec "$A" -- sh -c "rm -rf /rw/project && ln -s '$HOME/.ssh' /rw/project"
check "the swap happened on the host" test "$(readlink "$DIR/project")" = "$HOME/.ssh"
agentctl start "$B" >"$WORK/start-b.out" 2>&1; rc=$?
check "start refuses a mount whose path now resolves elsewhere" \
  bash -c "[ $rc != 0 ] && grep -q '$DIR/project now resolves to $HOME/.ssh' '$WORK/start-b.out'"
check "... and the sandbox stays stopped" test "$(incus list "$B" -c s -f csv)" = STOPPED
agentctl snapshot restore "$B" s1 >"$WORK/restore-swapped.out" 2>&1; rc=$?
check "snapshot restore refuses the swapped mount too" \
  bash -c "[ $rc != 0 ] && grep -q 'now resolves to $HOME/.ssh' '$WORK/restore-swapped.out'"
check "the credentials were never exposed" test "$(cat "$HOME/.ssh/id_test")" = "secret key"
agentctl exec "$A" -- sh -c "rm /rw/project && mkdir /rw/project"

# ---------------------------------------------------------------- snapshot restore shows what it brings back
agentctl start "$B" --mount-none >"$WORK/start-none.out" 2>&1 || { tail -5 "$WORK/start-none.out"; bad "start $B --mount-none"; }
check "without mounts, status shows no writable mount" \
  bash -c "! '$AGENTCTL' --provider incus status '$B' | grep -q 'writable mount'"
agentctl stop "$B" >/dev/null 2>&1
agentctl snapshot restore "$B" s1 >"$WORK/restore.out" 2>&1 || { cat "$WORK/restore.out"; bad "snapshot restore $B s1"; }
check "restore warns about the writable mount it brings back" grep -q "WARNING.*writable mount: $DIR/project" "$WORK/restore.out"
check "status after restore shows the restored writable mount (text)" \
  bash -c "'$AGENTCTL' --provider incus status '$B' | grep -q 'Warning: .*writable mount: $DIR/project'"
check "status after restore shows the restored writable mount (JSON)" \
  bash -c "'$AGENTCTL' --provider incus status '$B' --output json | grep -q 'writable mount: $DIR/project'"

agentctl start "$B" >"$WORK/start-b-again.out" 2>&1
check "start works again once the directory is a directory" \
  bash -c "[ \"\$(incus list '$B' -c s -f csv)\" = RUNNING ] && grep -q '$DIR/project -> /project (writable)' '$WORK/start-b-again.out'"
agentctl snapshot restore "$B" s1 >"$WORK/restore-running.out" 2>&1; rc=$?
check "restoring mounts into a running sandbox is refused (start checks them)" \
  bash -c "[ $rc = 1 ] && grep -q 'stop it first' '$WORK/restore-running.out'"

finish
