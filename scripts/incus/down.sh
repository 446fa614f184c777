#!/usr/bin/env bash
# down.sh - tear down what up.sh brought up: every instance, network and ACL,
# the daemon (stopped by its PID), its firewall tables, mounts, loop devices
# and state. Keeps the installed packages and the image tarball cache, so the
# next up.sh is quick. Run as root.
#
# Environment: AGENTCTL_INCUS_RUN (/run/agentctl-incus), as for up.sh.
set -uo pipefail
RUN_DIR=${AGENTCTL_INCUS_RUN:-/run/agentctl-incus}
[ "$(id -u)" = 0 ] || { echo "down.sh: must run as root" >&2; exit 1; }

if command -v incus >/dev/null 2>&1 && incus admin waitready --timeout=2 >/dev/null 2>&1; then
  for i in $(incus list -f csv -c n); do incus delete --force "$i" || true; done
  for i in $(incus image list -f csv -c f); do incus image delete "$i" || true; done
  for n in $(incus network list -f csv | awk -F, '$3=="YES"{print $1}'); do incus network delete "$n" || true; done
  for a in $(incus network acl list -f csv | cut -d, -f1); do incus network acl delete "$a" || true; done
fi

stop_pid() {  # stop_pid FILE NAME
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { echo "down.sh: $2 ($pid) ignored SIGTERM; killing it"; kill -KILL "$pid"; }
  fi
  rm -f "$1"
}
stop_pid "$RUN_DIR/incusd.pid" incusd

command -v nft >/dev/null 2>&1 && { nft delete table inet incus 2>/dev/null; nft delete table bridge incus 2>/dev/null; }
grep -E ' /var/lib/incus(/| )' /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
for dev in $(losetup -nO NAME,BACK-FILE 2>/dev/null | awk '$2 ~ "^/var/lib/incus/" {print $1}'); do losetup -d "$dev"; done

stop_pid "$RUN_DIR/lxcfs.pid" lxcfs
mountpoint -q /var/lib/lxcfs 2>/dev/null && umount -l /var/lib/lxcfs
rm -rf /var/lib/incus /var/log/incus /var/cache/incus
echo "down.sh: Incus stopped and its state removed (packages and the image cache kept)"
