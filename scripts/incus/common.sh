# shellcheck shell=bash
# common.sh - what up.sh and down.sh both know: where they keep their records,
# and how to read them. Sourced, never run.
#   AGENTCTL_INCUS_RUN    pid files and logs (/run/agentctl-incus: gone at reboot,
#                         like the daemons it names)
#   AGENTCTL_INCUS_OWNED  what up.sh made, for down.sh (/var/lib/agentctl-incus-owned:
#                         survives reboots, like the state it names)
#   AGENTCTL_INCUS_PROJECT  the Incus project up.sh makes and down.sh removes
#                         whole, with everything in it (unset: none, everything
#                         goes in the default project)
# Each caller keeps its own records: setup.sh the defaults (what it makes is the
# user's), scripts/test.sh a pair of its own (what it makes is the tests'), so
# that one never takes away what the other made.
RUN_DIR=${AGENTCTL_INCUS_RUN:-/run/agentctl-incus}
OWNED_DIR=${AGENTCTL_INCUS_OWNED:-/var/lib/agentctl-incus-owned}
PROJECT=${AGENTCTL_INCUS_PROJECT:-}
# The incus client's flag for it: `incus "${IN_PROJECT[@]}" list`. Every other
# incus command here means the default project (or the daemon as a whole),
# whatever project the caller's environment names.
IN_PROJECT=(${PROJECT:+--project "$PROJECT"})
unset INCUS_PROJECT

owned() { [ -e "$OWNED_DIR/$1" ]; }                          # owned RECORD: up.sh made it
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; } # alive PIDFILE

# lxcfs is a FUSE filesystem: killed (not stopped), it leaves its mount behind,
# and every access to it, mountpoint(1) and mkdir included, then fails with
# "Transport endpoint is not connected". So whether it is mounted is asked of
# /proc/mounts, and whether it is alive of the mount itself.
# AGENTCTL_LXCFS_DIR is for the test of this, which uses a scratch mount.
LXCFS_DIR=${AGENTCTL_LXCFS_DIR:-/var/lib/lxcfs}
lxcfs_mounted() { awk -v dir="$LXCFS_DIR" '$2 == dir {found = 1} END {exit !found}' /proc/mounts; }
lxcfs_dead() { lxcfs_mounted && ! stat "$LXCFS_DIR" >/dev/null 2>&1; }

# take_down_dead_lxcfs: a dead mount serves nobody. The one an earlier up.sh's
# lxcfs left (a run killed part-way: the record is there, the process is gone)
# is unmounted, as lxcfs's own service scripts do after a crash, and the
# records go with it. A dead mount up.sh did not make is left alone.
take_down_dead_lxcfs() {
  lxcfs_dead && owned started-lxcfs && ! alive "$RUN_DIR/lxcfs.pid" || return 1
  umount -l "$LXCFS_DIR" || return 1
  rm -f "$RUN_DIR/lxcfs.pid" "$OWNED_DIR/started-lxcfs"
}
