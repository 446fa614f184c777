#!/usr/bin/env bash
# up.sh after a run that was killed part-way: lxcfs, killed, leaves a dead FUSE
# mount on which mkdir and mountpoint(1) fail ("Transport endpoint is not
# connected"), and up.sh used to stop there. Replayed on a scratch directory
# (AGENTCTL_LXCFS_DIR), with ownership records in a scratch directory, against
# the real daemon (which up.sh finds running and leaves alone):
#   - up.sh takes down the dead mount its own lxcfs left and goes on;
#   - it leaves a dead mount it did not make, says so, and still goes on.
# The dead mount is a FUSE mount whose device was closed without ever
# answering, which is the state a killed lxcfs leaves (no lxcfs needed).
#
# Usage: lxcfs_dead_mount.sh REPO_ROOT     (exit 77 = skipped, with the reason printed)
set -uo pipefail
ROOT=${1:?usage: lxcfs_dead_mount.sh REPO_ROOT}
. "$ROOT/integration/incus/lib.sh"  # skip, ok, bad, finish
[ "$(id -u)" = 0 ] || skip "needs root (FUSE mounts, up.sh)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v incus >/dev/null 2>&1 || skip "the incus client is not installed"
incus admin waitready --timeout=3 >/dev/null 2>&1 || skip "no Incus daemon is reachable (scripts/incus/up.sh)"
image=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
incus image alias list -f csv | cut -d, -f1 | grep -qx "$image" || skip "image $image is missing (scripts/incus/up.sh)"

WORK=$(mktemp -d /tmp/agentctl-lxcfs-test.XXXXXX)
DIR=$WORK/lxcfs
export AGENTCTL_LXCFS_DIR=$DIR AGENTCTL_INCUS_OWNED=$WORK/owned AGENTCTL_INCUS_RUN=$WORK/run
. "$ROOT/scripts/incus/common.sh"  # lxcfs_mounted, on $DIR
cleanup() {
  # up.sh starts an lxcfs of its own on the scratch directory where lxcfs is installed.
  [ -s "$WORK/run/lxcfs.pid" ] && kill "$(cat "$WORK/run/lxcfs.pid")" 2>/dev/null && sleep 0.5
  while lxcfs_mounted; do umount -l "$DIR" || break; done
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$DIR" "$WORK/owned" "$WORK/run"

dead_mount() {
  python3 - "$DIR" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open("/dev/fuse", os.O_RDWR)
opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
if libc.mount(b"agentctl-test", sys.argv[1].encode(), b"fuse", 0, opts) != 0:
    sys.exit("mount: " + os.strerror(ctypes.get_errno()))
os.close(fd)  # nobody will ever answer: every access now fails with ENOTCONN
PY
}
up() { AGENTCTL_BIN=/nonexistent bash "$ROOT/scripts/incus/up.sh" 2>&1; }

# The symptom, as CI met it.
dead_mount || { bad "could not make a dead FUSE mount"; exit 1; }
mkdir -p "$DIR" 2>/dev/null && bad "mkdir on a dead mount succeeded (no symptom to replay)" \
  || ok "the dead mount: mkdir fails on it, as after a killed lxcfs"

# 1. The dead mount is up.sh's own: its record is there, its lxcfs is gone.
: >"$WORK/owned/started-lxcfs"
sh -c 'exit 0' & gone=$!
wait "$gone"
echo "$gone" >"$WORK/run/lxcfs.pid"
out=$(up) status=$?
echo "$out" | sed 's/^/    /'
[ "$status" = 0 ] && ok "up.sh with its own dead mount: exit 0" || bad "up.sh with its own dead mount: exit $status"
echo "$out" | grep -q 'took down the dead lxcfs mount' && ok "up.sh says it took the dead mount down" \
  || bad "up.sh did not say it took the dead mount down"
stat "$DIR" >/dev/null 2>&1 && ok "the directory is usable again" || bad "the directory is still dead"
# Where lxcfs is installed up.sh starts a new one there (recording its pid);
# either way the killed one's pid is no longer on record.
[ "$(cat "$WORK/run/lxcfs.pid" 2>/dev/null)" = "$gone" ] && bad "the killed lxcfs is still on record" \
  || ok "the killed lxcfs is no longer on record"
[ -s "$WORK/run/lxcfs.pid" ] && kill "$(cat "$WORK/run/lxcfs.pid")" 2>/dev/null && sleep 0.5
while lxcfs_mounted; do umount -l "$DIR" || break; done
rm -f "$WORK/owned/started-lxcfs" "$WORK/run/lxcfs.pid"

# 2. A dead mount up.sh did not make: left as it is, with a warning.
dead_mount || { bad "could not make the second dead mount"; exit 1; }
out=$(up) status=$?
echo "$out" | sed 's/^/    /'
[ "$status" = 0 ] && ok "up.sh with a dead mount that is not its own: exit 0" || bad "up.sh: exit $status"
echo "$out" | grep -q "warning: $DIR is a dead FUSE mount that up.sh did not make" && ok "up.sh warns and names the repair" \
  || bad "no warning about the foreign dead mount"
lxcfs_mounted && ! stat "$DIR" >/dev/null 2>&1 && ok "the foreign dead mount is left as it was" || bad "the foreign dead mount was touched"
[ -e "$WORK/owned/started-lxcfs" ] && bad "up.sh recorded an lxcfs it did not start" || ok "no lxcfs recorded"

finish
