#!/usr/bin/env bash
# exec, several names on start/stop/delete, and policy add of an address that
# stays refused, against the real Incus daemon (containers).
#
# exec: stdin reaches the command (pipes, here-documents, binary data, its
# end), -t with a pipe runs without a tty instead of hanging, -e and -w, and
# the exit codes (the command's, 128+N for a signal, 127 not found, 126 not
# executable). No traffic leaves this machine: nothing here connects anywhere.
#
# Usage: exec.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

AGENTCTL=${1:?usage: exec.sh AGENTCTL_BINARY}
IMAGE=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
TAG=$$
X=itest-x-$TAG
Y=itest-y-$TAG
MISSING=itest-missing-$TAG
WORK=$(mktemp -d /tmp/agentctl-incus-exec.XXXXXX)
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config
mkdir -p "$HOME"

. "$(dirname "$0")/lib.sh"
require_incus "the Incus admin socket"

# lacks TEXT STRING: STRING does not contain TEXT.
lacks() { ! grep -qF -- "$1" <<<"$2"; }
# within SECS agentctl ARGS...: agentctl, killed after SECS seconds (a hang is a failure, not a stuck suite).
within() { local secs=$1; shift; timeout "$secs" bash -c 'agentctl "$@"' agentctl "$@"; }

cleanup() {
  set +e
  for n in "$X" "$Y"; do agentctl delete --force "$n" >/dev/null 2>&1; done
  rm -rf "$WORK"
}
trap cleanup EXIT

for n in "$X" "$Y"; do
  if ! agentctl create "$n" --image "$IMAGE" --isolation container --mount-none >"$WORK/create.out" 2>&1; then
    cat "$WORK/create.out"; bad "create $n"; finish; exit 1
  fi
done
ok "create $X and $Y"

# ---------------------------------------------------------------- stdin
check "a pipe reaches the command" test "$(echo hi | agentctl exec "$X" -- cat)" = hi
out=$(agentctl exec "$X" -- sh -c 'cat; echo "[$(id -un)]"' <<'EOF'
first line
second line
EOF
)
check "a here-document reaches the command, then end-of-file" test "$out" = "first line
second line
[agent]"
check "the command reads end-of-file where stdin ends" test "$(printf 'a\nb\nc' | agentctl exec "$X" -- wc -c)" = 5
head -c 300000 /dev/urandom >"$WORK/random"
printf '\0\377\n\0' >>"$WORK/random"
agentctl exec "$X" -- cat <"$WORK/random" >"$WORK/random.back"
check "binary stdin comes back unchanged (300 KB, NUL and 0xff bytes)" cmp -s "$WORK/random" "$WORK/random.back"
check "binary stdin reaches the command unchanged" \
  test "$(agentctl exec "$X" -- sha256sum <"$WORK/random" | cut -d' ' -f1)" = "$(sha256sum <"$WORK/random" | cut -d' ' -f1)"
check "a command given /dev/null reads nothing" test "$(agentctl exec "$X" -- wc -c </dev/null)" = 0
# A command that does not read stdin ends the exec, whatever is still coming.
yes | within 60 exec "$X" -- true; rc=${PIPESTATUS[1]}
check "an endless stdin the command never reads does not hold the exec (exit $rc)" test "$rc" = 0
out=$(echo hi | within 60 exec -t "$X" -- cat); rc=$?
check "exec -t with a pipe runs without a tty and does not hang (exit $rc)" test "$rc:$out" = "0:hi"
check "exec -t with a pipe gives no tty" test "$(echo | within 60 exec -t "$X" -- sh -c 'test -t 0 && echo tty || echo no-tty')" = no-tty

# ---------------------------------------------------------------- -e and -w
check "-e KEY=VALUE sets a variable" test "$(agentctl exec -e GREETING='hello world' "$X" -- sh -c 'echo "$GREETING"')" = "hello world"
check "-e KEY passes this shell's value" test "$(FROM_HOST=yes agentctl exec -e FROM_HOST "$X" -- sh -c 'echo "$FROM_HOST"')" = yes
check "-e KEY of an unset variable sets nothing" \
  test "$(unset AGENTCTL_UNSET_VAR; agentctl exec -e AGENTCTL_UNSET_VAR "$X" -- sh -c 'echo "${AGENTCTL_UNSET_VAR-unset}"')" = unset
check "-e does not drop the defaults" test "$(agentctl exec -e A=1 "$X" -- sh -c 'echo "$HOME $A"')" = "/home/agent 1"
check "-w runs the command there" test "$(agentctl exec -w /tmp "$X" -- pwd)" = /tmp
check "--cwd with --root" test "$(agentctl exec --root --cwd /etc "$X" -- pwd)" = /etc
err=$(agentctl exec -w /nonexistent "$X" -- pwd 2>&1); rc=$?
check "-w with a directory the sandbox lacks fails (exit $rc) instead of running in /" test "$rc" = 1
check "  and says why: $err" grep -q "cannot run the command in /nonexistent in sandbox $X: no such directory" <<<"$err"
err=$(agentctl exec -w tmp "$X" -- pwd 2>&1 >/dev/null); rc=$?
check "-w with a relative path is refused (exit $rc)" test "$rc" = 1
check "the refusal says why" grep -q "must be an absolute path" <<<"$err"

# ---------------------------------------------------------------- exit codes
agentctl exec "$X" -- sh -c 'exit 255'; rc=$?
check "exit 255 passes through (got $rc)" test "$rc" = 255
agentctl exec "$X" -- sh -c 'kill -KILL $$'; rc=$?
check "a command killed by SIGKILL gives 137 (got $rc)" test "$rc" = 137
err=$(agentctl exec "$X" -- agentctl-no-such-command 2>&1); rc=$?
check "a command that is not found gives 127 (got $rc)" test "$rc" = 127
check "  and says so: $err" grep -q "agentctl: agentctl-no-such-command: command not found in sandbox $X" <<<"$err"
check "  without an Incus error" lacks Incus "$err"
agentctl exec "$X" -- sh -c 'echo echo hi >/tmp/plain; chmod 644 /tmp/plain'
err=$(agentctl exec "$X" -- /tmp/plain 2>&1); rc=$?
check "a file that is not executable gives 126 (got $rc)" test "$rc" = 126
check "  and says so: $err" grep -q "/tmp/plain: cannot be run in sandbox $X" <<<"$err"
err=$(agentctl exec "$X" -- sh -c 'exit 127' 2>&1); rc=$?
check "a command's own exit 127 passes through (got $rc)" test "$rc" = 127
check "  without a not-found message" test -z "$err"
err=$(agentctl exec "$X" -- sh -c 'exit 126' 2>&1); rc=$?
check "a command's own exit 126 passes through (got $rc)" test "$rc:$err" = "126:"

# ---------------------------------------------------------------- cp
mkdir -p "$WORK/tree/sub" "$WORK/back"
printf 'one\n' >"$WORK/tree/a.txt"; chmod 640 "$WORK/tree/a.txt"
printf '#!/bin/sh\necho run\n' >"$WORK/tree/sub/run.sh"; chmod 755 "$WORK/tree/sub/run.sh"
head -c 100000 /dev/urandom >"$WORK/tree/sub/blob"
check "cp a directory into the sandbox" agentctl cp "$WORK/tree" "$X:/tmp"
check "  it is there whole" test "$(agentctl exec "$X" -- sha256sum /tmp/tree/sub/blob | cut -d' ' -f1)" = \
  "$(sha256sum <"$WORK/tree/sub/blob" | cut -d' ' -f1)"
check "  modes kept" test "$(agentctl exec "$X" -- stat -c %a /tmp/tree/a.txt /tmp/tree/sub/run.sh | tr '\n' ' ')" = "640 755 "
check "  owned by the sandbox user" test "$(agentctl exec "$X" -- stat -c '%U' /tmp/tree /tmp/tree/a.txt | sort -u)" = agent
check "cp a file to a new name" agentctl cp "$WORK/tree/a.txt" "$X:/tmp/renamed.txt"
check "  with its content" test "$(agentctl exec "$X" -- cat /tmp/renamed.txt)" = one
check "cp a file out of the sandbox" agentctl cp "$X:/tmp/tree/sub/run.sh" "$WORK/back/"
check "  mode kept" test "$(stat -c %a "$WORK/back/run.sh")" = 755
check "cp a directory out of the sandbox, to a new name" agentctl cp "$X:/tmp/tree" "$WORK/back/copy"
check "  whole" cmp -s "$WORK/tree/sub/blob" "$WORK/back/copy/sub/blob"
check "  and its modes" test "$(stat -c %a "$WORK/back/copy/a.txt")" = 640
agentctl exec --root "$X" -- sh -c 'mkdir -p /tmp/suid && cp /bin/true /tmp/suid/t && chmod 4755 /tmp/suid/t'
check "cp out drops a setuid bit" bash -c "agentctl cp '$X:/tmp/suid' '$WORK/back/' && test \"\$(stat -c %a '$WORK/back/suid/t')\" = 755"
agentctl exec --root "$X" -- sh -c 'mkdir -p /tmp/dev && mknod /tmp/dev/null2 c 1 3' 2>/dev/null
if agentctl exec "$X" -- test -c /tmp/dev/null2; then
  err=$(agentctl cp "$X:/tmp/dev" "$WORK/back/" 2>&1); rc=$?
  check "cp out refuses a device node (exit $rc): $err" bash -c "test $rc = 1 && ! test -e '$WORK/back/dev'"
fi
tar -C "$WORK" -cf - tree | agentctl cp - "$X:/home/agent"; rc=$?
check "cp - unpacks a tar archive from stdin (exit $rc)" agentctl exec "$X" -- test -f /home/agent/tree/sub/run.sh
check "cp NAME:PATH - writes a tar archive to stdout" bash -c "agentctl cp '$X:/tmp/tree' - | tar -tf - | grep -qx 'tree/sub/blob'"
err=$(agentctl cp "$X:/tmp/tree/a.txt" "$HOME/.ssh/a.txt" 2>&1); rc=$?
check "cp refuses a host path a mount may not use (exit $rc)" bash -c "test $rc = 1 && ! test -e '$HOME/.ssh/a.txt'"
check "  and says why: $err" grep -q "is refused (credentials or backend state)" <<<"$err"
mkdir -p "$HOME/.ssh"; ln -s "$HOME/.ssh" "$WORK/innocent"
err=$(agentctl cp "$X:/tmp/tree/a.txt" "$WORK/innocent/a.txt" 2>&1); rc=$?
check "cp refuses a symlink into a refused directory (exit $rc)" bash -c "test $rc = 1 && ! test -e '$HOME/.ssh/a.txt'"
err=$(agentctl cp "$X:/nonexistent" "$WORK/back/" 2>&1); rc=$?
check "cp of a missing sandbox path fails (exit $rc): $err" bash -c "test $rc = 1"
check "  and says so" grep -q "/nonexistent: no such file or directory in the sandbox" <<<"$err"
err=$(agentctl cp "$WORK/tree" "$X:/no/such/dir/x" 2>&1); rc=$?
check "cp into a missing sandbox directory fails (exit $rc)" grep -q "/no/such/dir: no such directory in the sandbox" <<<"$err"

# ---------------------------------------------------------------- signals
# Ctrl-C (SIGINT) and SIGTERM sent to agentctl reach the command (without -t).
for signal in INT TERM; do
  ( exec "$AGENTCTL" --provider incus ${AGENTCTL_REMOTE:+--remote "$AGENTCTL_REMOTE"} exec "$X" -- \
      sh -c "trap 'echo got-$signal; exit 42' $signal; echo ready; while :; do sleep 0.1; done" ) >"$WORK/sig.out" 2>&1 &
  pid=$!
  wait_until 60 grep -q ready "$WORK/sig.out"
  kill -s "$signal" "$pid"
  # A signal that never arrives fails, it does not hang the suite. The
  # watchdog holds none of the suite's output open (the test runner waits for
  # that to close), and goes with its sleep.
  ( sleep 60 & sleeper=$!; trap 'kill $sleeper; exit' TERM; wait $sleeper; kill -KILL "$pid" ) >/dev/null 2>&1 &
  watchdog=$!
  wait "$pid"; rc=$?
  kill "$watchdog" 2>/dev/null
  check "SIG$signal to exec reaches the command, which exits 42 (got $rc)" test "$rc" = 42
  check "  after its trap ran" grep -q "got-$signal" "$WORK/sig.out"
done

# ---------------------------------------------------------------- snapshot errors
check "snapshot create" agentctl snapshot create "$X" s1
err=$(agentctl snapshot create "$X" s1 2>&1); rc=$?
check "a snapshot name taken is refused (exit $rc)" test "$rc" = 1
check "  in agentctl's words: $err" grep -q "sandbox $X already has a snapshot named s1" <<<"$err"
check "  not the database's" lacks "UNIQUE" "$err"
agentctl snapshot delete "$X" s1 >/dev/null 2>&1

# ---------------------------------------------------------------- several names
within 120 stop "$X" "$X" >"$WORK/out" 2>&1; rc=$?
check "stop with a name twice stops it once (exit $rc)" test "$rc" = 0
check "  and reports it" grep -qx "agentctl: stopped $X" "$WORK/out"
within 120 start "$X" "$Y" >"$WORK/out" 2>&1; rc=$?
check "start takes several names (exit $rc)" test "$rc" = 0
check "  and reports each" bash -c "grep -qx 'agentctl: started $X' '$WORK/out' && grep -qx 'agentctl: started $Y' '$WORK/out'"
check "  and both run" test "$(agentctl exec "$X" -- echo up)" = up
within 120 stop "$X" "$MISSING" >"$WORK/out" 2>&1; rc=$?
check "stop of a sandbox and a missing one exits 1 (got $rc)" test "$rc" = 1
check "  reports the one stopped" grep -qx "agentctl: stopped $X" "$WORK/out"
check "  and the missing one" grep -q "^agentctl: $MISSING: " "$WORK/out"
check "  shows no step of $X as failed" bash -c "! grep -q 'failed: .*$X' '$WORK/out'"
check "  and names the failure last" test "$(tail -n1 "$WORK/out")" = "agentctl: 1 of 2 failed: $MISSING"
within 120 rm -f "$Y" "$Y" >"$WORK/out" 2>&1; rc=$?
check "rm -f with a name twice deletes it once (exit $rc)" test "$rc" = 0
check "  and it is gone" bash -c "! agentctl list -q | grep -qx '$Y'"
agentctl start "$X" >/dev/null 2>&1

# ---------------------------------------------------------------- policy add
before=$(agentctl status "$X" --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["network"]["allow"])')
agentctl policy check "$X" 10.0.0.5:22 >/dev/null 2>&1; check_rc=$?
err=$(agentctl policy add "$X" 10.0.0.5:22 2>&1); rc=$?
check "policy add of a LAN address under deny-LAN exits as policy check does (4; got $rc, check $check_rc)" \
  test "$rc:$check_rc" = "4:4"
check "  and gives the reason: $err" grep -q "10.0.0.5:22 would still be refused in $X (lan)" <<<"$err"
after=$(agentctl status "$X" --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["network"]["allow"])')
check "  and changes nothing" test "$before" = "$after"
agentctl policy add "$X" 192.168.1.10 2>/dev/null; rc=$?
check "policy add of a LAN address on any port is refused too (exit $rc)" test "$rc" = 4
check "policy add of a public address still works" agentctl policy add "$X" 11.213.78.9:443
check "  and it is allowed now" bash -c "agentctl policy check '$X' 11.213.78.9:443 >/dev/null"

# ---------------------------------------------------------------- a damaged record
ports=$(incus config get "$X" user.agentctl.ports)
incus config set "$X" user.agentctl.ports 'not json'
out=$(agentctl list 2>"$WORK/err"); rc=$?
check "list with one damaged record still lists every sandbox (exit $rc)" test "$rc" = 0
check "  the damaged one included" grep -q "^$X " <<<"$out"
check "  and warns, naming the sandbox and the key" grep -q "$X: .*user.agentctl.ports" "$WORK/err"
rc=0; err=$(agentctl status "$X" 2>&1 >/dev/null) || rc=$?
check "status of the damaged sandbox fails (exit $rc)" test "$rc" = 1
check "  naming the key: $err" grep -q "user.agentctl.ports" <<<"$err"
incus config set "$X" user.agentctl.ports "$ports"
check "with the record put back, status works again" bash -c "agentctl status '$X' >/dev/null"

finish
