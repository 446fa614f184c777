#!/usr/bin/env bash
# down.sh - undo what up.sh and the test suites did, and nothing else.
#
# It removes:
#   - the project up.sh made ($AGENTCTL_INCUS_OWNED/project), with every instance,
#     image and profile in it;
#   - without such a project: sandboxes in the default project whose names start
#     with a test prefix ($AGENTCTL_TEST_PREFIXES) and that agentctl made
#     (user.agentctl.managed=true);
#   - the bridges and ACLs of those sandboxes, with the resolver and egress proxy
#     agentctl runs on the host for each bridge (Incus keeps them in the default
#     project whatever the sandbox's: agentctl marks them with user.agentctl.sandbox
#     and user.agentctl.project) and agentctl's host firewall tables for those
#     bridges, also when an interrupted create left them;
#   - the image up.sh imported (recorded in $AGENTCTL_INCUS_OWNED/image);
#   - the HTTPS listener up.sh set (core.https_address, recorded in
#     $AGENTCTL_INCUS_OWNED/https-address), if it is still the one it set;
#   - the daemon, only if up.sh started it ($AGENTCTL_INCUS_OWNED/started-incusd)
#     and no instance but the test sandboxes is left in it (one that is not is
#     someone's: the daemon is then left running, and no longer recorded as
#     up.sh's); its whole state (/var/lib/incus, firewall tables, loop devices)
#     only if up.sh also initialised it from nothing
#     ($AGENTCTL_INCUS_OWNED/initialised).
# A daemon that was running before up.sh, and every instance, image, network
# and ACL that is not the tests', is left exactly as it was. Packages and the
# image tarball cache are kept. Run as root.
#
# Environment: AGENTCTL_INCUS_RUN (/run/agentctl-incus), AGENTCTL_INCUS_OWNED
# (/var/lib/agentctl-incus-owned) and AGENTCTL_INCUS_PROJECT, as for up.sh; AGENTCTL_TEST_PREFIXES
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
  our_project=
  if [ -n "$PROJECT" ] && owned project && [ "$(cat "$OWNED_DIR/project")" = "$PROJECT" ]; then our_project=$PROJECT; fi
  if [ -n "$our_project" ]; then
    # Everything in a project of up.sh's own is the callers'.
    for i in $(incus list --project "$our_project" -f csv -c n); do
      act incus delete --force --project "$our_project" "$i" || true
    done
  fi
  # One line per instance of every project: PROJECT,NAME.
  while IFS=, read -r p i; do
    [ -n "$i" ] || continue
    [ "$p" != "$our_project" ] || continue
    if [ -z "$our_project" ] && [ "$p" = default ] && is_test_name "$i" &&
      [ "$(incus config get "$i" user.agentctl.managed 2>/dev/null)" = true ]; then
      act incus delete --force "$i" || true
    else
      others+=("$p/$i")
    fi
  done < <(incus list --all-projects -f csv -c e,n)
  # ours OWNER PROJECT: a bridge or ACL (which Incus keeps in the default
  # project) is the callers' when agentctl made it for a sandbox of up.sh's
  # project; without such a project, when its sandbox has a test name and no
  # instance that is not the tests' has that name.
  ours() {
    local o
    [ -n "$1" ] || return 1
    if [ -n "$our_project" ]; then [ "$2" = "$our_project" ]; return; fi
    is_test_name "$1" || return 1
    for o in "${others[@]}"; do [ "${o#*/}" != "$1" ] || return 1; done
  }
  for n in $(incus network list -f csv | awk -F, '$3=="YES"{print $1}'); do
    owner=$(incus network get "$n" user.agentctl.sandbox 2>/dev/null)
    if ours "$owner" "$(incus network get "$n" user.agentctl.project 2>/dev/null)"; then
      # agentctl's resolver and egress proxy for that bridge, which a run
      # killed before its sandbox's delete leaves running on the host.
      gw=$(incus network get "$n" ipv4.address 2>/dev/null | cut -d/ -f1)
      for pid in $(pgrep -f -- "dnsmasq .*--interface=$n( |\$)") ${gw:+$(pgrep -f -- "egress-proxy --listen $gw:")}; do
        act kill "$pid" 2>/dev/null || true
      done
      act incus network delete "$n" || true
      # agentctl's host firewall table for that bridge (named in
      # src/provider/incus/network/host_firewall.cpp), which `agentctl delete` removes.
      if nft list table inet "agentctl-$n" >/dev/null 2>&1; then act nft delete table inet "agentctl-$n"; fi
    fi
  done
  for a in $(incus network acl list -f csv | cut -d, -f1); do
    owner=$(incus network acl get "$a" user.agentctl.sandbox 2>/dev/null)
    if ours "$owner" "$(incus network acl get "$a" user.agentctl.project 2>/dev/null)"; then act incus network acl delete "$a" || true; fi
  done
  if owned image; then
    alias=$(cat "$OWNED_DIR/image")
    if incus image alias list -f csv | cut -d, -f1 | grep -qx "$alias"; then act incus image delete "$alias" || true; fi
    act rm -f "$OWNED_DIR/image"
  fi
  if [ -n "$our_project" ]; then
    for f in $(incus image list --project "$our_project" -f csv -c f); do
      act incus image delete --project "$our_project" "$f" || true
    done
    for pr in $(incus profile list --project "$our_project" -f csv | cut -d, -f1); do
      [ "$pr" = default ] || act incus profile delete --project "$our_project" "$pr" || true
    done
    act incus project delete "$our_project" && act rm -f "$OWNED_DIR/project"
  elif owned project && ! incus project show "$(cat "$OWNED_DIR/project")" >/dev/null 2>&1; then
    act rm -f "$OWNED_DIR/project"  # already gone
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
if [ ${#others[@]} -gt 0 ]; then
  # Someone uses the daemon the tests started (setup.sh's sandbox, say, made
  # after a run that was killed): it is theirs now. Left running, and no longer
  # recorded as up.sh's, so that no later down.sh stops it either.
  act rm -f "$OWNED_DIR/started-incusd" "$RUN_DIR/incusd.pid"
  say "incusd left running, and no longer counted as up.sh's: it holds instances that are not test sandboxes (${others[*]})"
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
