#!/usr/bin/env bash
# down.sh - undo what up.sh and the test suites did, and nothing else.
#
# It removes:
#   - sandboxes whose names start with a test prefix ($AGENTCTL_TEST_PREFIXES) and
#     that agentctl made (user.agentctl.managed=true), with their bridges, ACLs
#     (found by user.agentctl.sandbox) and agentctl's host firewall tables for
#     those bridges, and such bridges/ACLs left over by an interrupted create;
#   - the image up.sh imported (recorded in $AGENTCTL_INCUS_OWNED/image);
#   - the HTTPS listener up.sh set (core.https_address, recorded in
#     $AGENTCTL_INCUS_OWNED/https-address), if it is still the one it set;
#   - the daemon, only if up.sh started it ($AGENTCTL_INCUS_OWNED/started-incusd);
#     its whole state (/var/lib/incus, firewall tables, loop devices) only if
#     up.sh also initialised it from nothing ($AGENTCTL_INCUS_OWNED/initialised)
#     and no instance but the test sandboxes is left in it.
# A daemon that was running before up.sh, and every instance, image, network
# and ACL that is not the tests', is left exactly as it was. Packages and the
# image tarball cache are kept. Run as root.
#
# Environment: AGENTCTL_INCUS_RUN (/run/agentctl-incus) and AGENTCTL_INCUS_OWNED
# (/var/lib/agentctl-incus-owned), as for up.sh; AGENTCTL_TEST_PREFIXES
# ("itest- doctest-"); AGENTCTL_DOWN_DRY_RUN=1 prints what would be done and
# changes nothing.
set -uo pipefail
. "$(dirname "$0")/common.sh"
TEST_PREFIXES=${AGENTCTL_TEST_PREFIXES:-itest- doctest-}
DRY_RUN=${AGENTCTL_DOWN_DRY_RUN:-0}
[ "$(id -u)" = 0 ] || { echo "down.sh: must run as root" >&2; exit 1; }

say() { echo "down.sh: $*"; }
act() {  # act COMMAND...: run it, or only print it in a dry run
  if [ "$DRY_RUN" = 1 ]; then echo "down.sh: would run: $*"; else "$@"; fi
}
is_test_name() {
  local p
  for p in $TEST_PREFIXES; do case "$1" in "$p"*) return 0 ;; esac; done
  return 1
}

daemon_up=0
command -v incus >/dev/null 2>&1 && incus admin waitready --timeout=2 >/dev/null 2>&1 && daemon_up=1

others=()
if [ "$daemon_up" = 1 ]; then
  for i in $(incus list -f csv -c n); do
    if is_test_name "$i" && [ "$(incus config get "$i" user.agentctl.managed 2>/dev/null)" = true ]; then
      act incus delete --force "$i" || true
    else
      others+=("$i")
    fi
  done
  for n in $(incus network list -f csv | awk -F, '$3=="YES"{print $1}'); do
    owner=$(incus network get "$n" user.agentctl.sandbox 2>/dev/null)
    if [ -n "$owner" ] && is_test_name "$owner"; then
      act incus network delete "$n" || true
      # agentctl's host firewall table for that bridge (named in
      # src/provider/incus/host_firewall.cpp), which `agentctl delete` removes.
      if nft list table inet "agentctl-$n" >/dev/null 2>&1; then act nft delete table inet "agentctl-$n"; fi
    fi
  done
  for a in $(incus network acl list -f csv | cut -d, -f1); do
    owner=$(incus network acl get "$a" user.agentctl.sandbox 2>/dev/null)
    if [ -n "$owner" ] && is_test_name "$owner"; then act incus network acl delete "$a" || true; fi
  done
  if owned image; then
    alias=$(cat "$OWNED_DIR/image")
    if incus image alias list -f csv | cut -d, -f1 | grep -qx "$alias"; then act incus image delete "$alias" || true; fi
    act rm -f "$OWNED_DIR/image"
  fi
  if owned https-address; then
    if [ "$(incus config get core.https_address)" = "$(cat "$OWNED_DIR/https-address")" ]; then
      act incus config unset core.https_address || true
    fi
    act rm -f "$OWNED_DIR/https-address"
  fi
fi

stop_pid() {  # stop_pid FILE NAME
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    if [ "$DRY_RUN" = 1 ]; then say "would stop $2 (pid $pid)"; return 0; fi
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { say "$2 ($pid) ignored SIGTERM; killing it"; kill -KILL "$pid"; }
  fi
  act rm -f "$1"
}

if ! owned started-incusd; then
  say "incusd was not started by up.sh: left running, with everything but the test sandboxes"
  exit 0
fi
if ! owned initialised; then
  stop_pid "$RUN_DIR/incusd.pid" incusd
  act rm -f "$OWNED_DIR/started-incusd"
  say "incusd (started by up.sh) stopped; its state predates up.sh and is kept"
  exit 0
fi
if [ "$daemon_up" != 1 ]; then
  # Without a running daemon nobody can tell whether instances that are not
  # the tests' were added since up.sh: keep the state.
  act rm -f "$OWNED_DIR/started-incusd" "$RUN_DIR/incusd.pid"
  say "incusd is not running, so its state cannot be checked for instances that are not the tests': kept"
  exit 0
fi
if [ ${#others[@]} -gt 0 ]; then
  say "incusd left running: it holds instances that are not test sandboxes (${others[*]})"
  exit 0
fi

# up.sh started this daemon and initialised it from nothing: all of it is ours.
stop_pid "$RUN_DIR/incusd.pid" incusd
if command -v nft >/dev/null 2>&1; then
  act nft delete table inet incus 2>/dev/null
  act nft delete table bridge incus 2>/dev/null
fi
grep -E ' /var/lib/incus(/| )' /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do act umount -l "$m" 2>/dev/null; done
for dev in $(losetup -nO NAME,BACK-FILE 2>/dev/null | awk '$2 ~ "^/var/lib/incus/" {print $1}'); do act losetup -d "$dev"; done
if owned started-lxcfs; then
  stop_pid "$RUN_DIR/lxcfs.pid" lxcfs
  # Stopped, lxcfs takes its mount down; killed, it leaves it (see common.sh).
  if lxcfs_mounted; then act umount -l "$LXCFS_DIR"; fi
fi
act rm -rf /var/lib/incus /var/log/incus /var/cache/incus
act rm -f "$OWNED_DIR/started-incusd" "$OWNED_DIR/initialised" "$OWNED_DIR/started-lxcfs"
say "Incus (started and initialised by up.sh) stopped and its state removed (packages and the image cache kept)"
