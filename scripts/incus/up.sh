#!/usr/bin/env bash
# up.sh - bring up a local Incus daemon for agentctl on a Debian 12 host
# without systemd as PID 1, and import a locally built Debian image.
#
# Idempotent: every step checks whether it is already done. Run as root.
#   1. packages from bookworm-backports (incus, dnsmasq-base, debootstrap, btrfs-progs, zstd)
#   2. lxcfs (optional) and incusd started by hand, PIDs kept in $AGENTCTL_INCUS_RUN
#   3. preseed: a storage pool and a default profile WITHOUT a network. agentctl
#      gives every sandbox its own managed bridge, so no shared network exists.
#   4. with AGENTCTL_INCUS_PROJECT, a project of that name with its own images and
#      profiles (its default profile: the root disk); networks stay in the default
#      project, as Incus keeps bridges there
#   5. a Debian 12 image built by `agentctl image build` (debootstrap), its tarball
#      cached in $AGENTCTL_INCUS_CACHE between runs, imported with alias $AGENTCTL_INCUS_IMAGE
#      (into the project, when there is one)
#
# Ownership: up.sh writes down what it made itself into $AGENTCTL_INCUS_OWNED
# (a directory that survives reboots), so that down.sh removes only that:
#   started-incusd / started-lxcfs  it started the daemon (pid files in $AGENTCTL_INCUS_RUN)
#   initialised                     it initialised a daemon that had no state at all
#                                   (no storage pool, instance, image or network)
#   image                           the alias of the image it imported
#   project                         the project it made (AGENTCTL_INCUS_PROJECT)
#   https-address                   the core.https_address it set (AGENTCTL_INCUS_HTTPS)
# An Incus that was already running or already had state is used as it is and
# is never stopped or wiped by down.sh.
#
# Environment (all optional):
#   AGENTCTL_INCUS_RUN    state dir for pid files and logs   (/run/agentctl-incus)
#   AGENTCTL_INCUS_OWNED  what up.sh made, for down.sh       (/var/lib/agentctl-incus-owned)
#   AGENTCTL_INCUS_CACHE  image tarball cache                (/var/cache/agentctl-ci)
#   AGENTCTL_INCUS_IMAGE  image alias                        (agentctl-debian-12)
#   AGENTCTL_INCUS_POOL   storage driver: btrfs | dir        (btrfs)
#   AGENTCTL_INCUS_POOL_SIZE  size of the btrfs loop file    (8GiB)
#   AGENTCTL_DEBIAN_MIRROR    Debian mirror                  (http://deb.debian.org/debian)
#   AGENTCTL_BIN          the agentctl binary that builds the image (agentctl on PATH)
#   AGENTCTL_INCUS_MAP_IDS    host uids/gids root may map into sandboxes (1000 1500)
#   AGENTCTL_INCUS_HTTPS      opt-in: a loopback ADDRESS:PORT the daemon also listens on
#                             over HTTPS (core.https_address), for the remote suite
#   AGENTCTL_INCUS_PROJECT    opt-in: a project of its own for everything the callers
#                             make (scripts/test.sh: agentctl-tests)
set -euo pipefail

. "$(dirname "$0")/common.sh"
CACHE_DIR=${AGENTCTL_INCUS_CACHE:-/var/cache/agentctl-ci}
IMAGE_ALIAS=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
POOL_DRIVER=${AGENTCTL_INCUS_POOL:-btrfs}
POOL_SIZE=${AGENTCTL_INCUS_POOL_SIZE:-8GiB}
MIRROR=${AGENTCTL_DEBIAN_MIRROR:-http://deb.debian.org/debian}

export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=600 -y -q)
START=$(date +%s%N)
say() { local ds=$(( ($(date +%s%N) - START) / 100000000 )); printf '[%4d.%ds] %s\n' $((ds / 10)) $((ds % 10)) "$*"; }
die() { echo "up.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts incusd)"
mkdir -p "$RUN_DIR" "$CACHE_DIR" "$OWNED_DIR"

# ---------------------------------------------------------------- 1. packages
have_incusd() { [ -x /usr/libexec/incus/incusd ] && command -v incus >/dev/null 2>&1; }
missing=()
have_incusd || missing+=(incus-base incus-client)
command -v dnsmasq >/dev/null 2>&1 || missing+=(dnsmasq-base)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
# conntrack: a narrowed policy also cuts connections already open (conntrack -D).
command -v conntrack >/dev/null 2>&1 || missing+=(conntrack)
[ "$POOL_DRIVER" != btrfs ] || command -v mkfs.btrfs >/dev/null 2>&1 || missing+=(btrfs-progs)
if [ ${#missing[@]} -gt 0 ]; then
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$MIRROR" >/etc/apt/sources.list.d/agentctl-backports.sources
  fi
  "${APT[@]}" update >"$RUN_DIR/apt.log" 2>&1 || { cat "$RUN_DIR/apt.log" >&2; die "apt-get update failed"; }
  "${APT[@]}" install --no-install-recommends -t bookworm-backports "${missing[@]}" >>"$RUN_DIR/apt.log" 2>&1 \
    || { tail -20 "$RUN_DIR/apt.log" >&2; die "installing ${missing[*]} failed (log: $RUN_DIR/apt.log)"; }
fi
say "packages ready ($(incus version 2>/dev/null | awk '/Client/{print "incus " $3}'))"

# ---------------------------------------------------------------- 2. daemons
# Sandboxes map one host user (the owner of their writable mounts) into their
# own uid range with raw.idmap; newuidmap lets root map only ids listed for it
# in /etc/subuid and /etc/subgid. Before incusd starts: root's large range
# (what Incus allocates container ranges from), then the ids of the users who
# own sandbox mounts here (AGENTCTL_INCUS_MAP_IDS: the test suites use 1000
# and 1500).
for f in /etc/subuid /etc/subgid; do
  touch "$f"
  awk -F: '($1 == "root" || $1 == "0") && $3 >= 65536 {found=1} END {exit !found}' "$f" ||
    echo "root:1000000:1000000000" >>"$f"
  for id in ${AGENTCTL_INCUS_MAP_IDS:-1000 1500}; do
    grep -qx "root:$id:1" "$f" || echo "root:$id:1" >>"$f"
  done
done
if take_down_dead_lxcfs; then
  say "took down the dead lxcfs mount an earlier up.sh left (its lxcfs had been killed)"
fi
mkdir -p /var/log/incus
if lxcfs_dead; then
  say "warning: $LXCFS_DIR is a dead FUSE mount that up.sh did not make: containers start without lxcfs (to repair: umount -l $LXCFS_DIR, then run up.sh again)"
elif command -v lxcfs >/dev/null 2>&1 && ! lxcfs_mounted; then
  mkdir -p "$LXCFS_DIR"
  setsid lxcfs "$LXCFS_DIR" >"$RUN_DIR/lxcfs.log" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/lxcfs.pid"
  : >"$OWNED_DIR/started-lxcfs"
  for _ in $(seq 50); do lxcfs_mounted && break; sleep 0.1; done
fi
if ! incus admin waitready --timeout=1 >/dev/null 2>&1; then
  getent group incus-admin >/dev/null || groupadd --system incus-admin
  setsid /usr/libexec/incus/incusd --group incus-admin --logfile=/var/log/incus/incusd.log \
    >"$RUN_DIR/incusd.out" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/incusd.pid"
  : >"$OWNED_DIR/started-incusd"
  incus admin waitready --timeout=60 || { tail -20 "$RUN_DIR/incusd.out" >&2; die "incusd did not become ready"; }
  say "incusd started (pid $(cat "$RUN_DIR/incusd.pid"))"
elif [ -e "$OWNED_DIR/started-incusd" ] && alive "$RUN_DIR/incusd.pid"; then
  say "incusd already running (started by an earlier up.sh, pid $(cat "$RUN_DIR/incusd.pid"))"
else
  # Someone else's daemon: use it, and never record a pid that down.sh would stop.
  rm -f "$RUN_DIR/incusd.pid" "$OWNED_DIR/started-incusd"
  say "incusd already running (not started by up.sh: down.sh leaves it running)"
fi

# ---------------------------------------------------------------- 3. storage + profile
# A daemon with no state at all is ours to initialise (and down.sh's to wipe).
pristine() {
  [ -z "$(incus storage list -f csv 2>/dev/null)" ] && [ -z "$(incus list -f csv -c n --all-projects 2>/dev/null)" ] &&
    [ -z "$(incus image list -f csv -c f --all-projects 2>/dev/null)" ] &&
    [ -z "$(incus network list -f csv 2>/dev/null | awk -F, '$3=="YES"')" ]
}
if ! incus storage show default >/dev/null 2>&1; then
  pristine && : >"$OWNED_DIR/initialised"
  if [ "$POOL_DRIVER" = btrfs ]; then pool_config="{size: $POOL_SIZE}"; else pool_config="{}"; fi
  incus admin init --preseed <<PRESEED
config:
  images.auto_update_interval: "0"
storage_pools:
- name: default
  driver: $POOL_DRIVER
  config: $pool_config
profiles:
- name: default
  description: agentctl - root disk only; every sandbox gets its own bridge
  devices:
    root: {type: disk, path: /, pool: default}
PRESEED
fi
say "storage pool 'default' ($(incus storage list -f csv | awk -F, '$1=="default"{print $2}')) ready"

# ---------------------------------------------------------------- 4. project (opt-in)
if [ -n "$PROJECT" ]; then
  if ! incus project show "$PROJECT" >/dev/null 2>&1; then
    incus project create "$PROJECT" -c features.images=true -c features.profiles=true \
      -c features.storage.volumes=true -c features.networks=false >/dev/null || die "cannot create project $PROJECT"
    echo "$PROJECT" >"$OWNED_DIR/project"
  elif ! owned project; then
    die "a project called $PROJECT already exists and up.sh did not make it: choose another AGENTCTL_INCUS_PROJECT"
  fi
  if ! incus profile device get default root pool --project "$PROJECT" >/dev/null 2>&1; then
    incus profile device add default root disk path=/ pool=default --project "$PROJECT" >/dev/null ||
      die "cannot give project $PROJECT's default profile a root disk"
  fi
  say "project '$PROJECT' ready"
fi

# ---------------------------------------------------------------- 5. image
# agentctl builds the image itself (`agentctl image build`, without --base:
# debootstrap, networkd, metadata, import); its tarball is cached below $CACHE_DIR.
AGENTCTL_BIN=${AGENTCTL_BIN:-$(command -v agentctl || true)}
if ! incus image alias list "${IN_PROJECT[@]}" -f csv | cut -d, -f1 | grep -qx "$IMAGE_ALIAS"; then
  [ -n "$AGENTCTL_BIN" ] && [ -x "$AGENTCTL_BIN" ] ||
    die "the image $IMAGE_ALIAS is missing and no agentctl binary was found to build it (set AGENTCTL_BIN or install agentctl first)"
  XDG_CACHE_HOME="$CACHE_DIR" AGENTCTL_DEBIAN_MIRROR="$MIRROR" \
    "$AGENTCTL_BIN" --provider incus "${IN_PROJECT[@]}" image build "$IMAGE_ALIAS" ||
    die "agentctl image build $IMAGE_ALIAS failed"
  # Inside a project of up.sh's own, the project's removal takes the image with it.
  [ -n "$PROJECT" ] || echo "$IMAGE_ALIAS" >"$OWNED_DIR/image"
fi
say "image '$IMAGE_ALIAS' ready${PROJECT:+ in project $PROJECT}"

# ---------------------------------------------------------------- 6. HTTPS listener (opt-in)
# The remote suite (integration/incus/remote.sh) reaches this daemon over HTTPS
# as an Incus remote. Loopback only: nothing outside this machine can connect.
if [ -n "${AGENTCTL_INCUS_HTTPS:-}" ]; then
  case "$AGENTCTL_INCUS_HTTPS" in
    127.*:[0-9]* | "[::1]:"[0-9]*) ;;
    *) die "AGENTCTL_INCUS_HTTPS must be a loopback ADDRESS:PORT such as 127.0.0.1:8443 (got $AGENTCTL_INCUS_HTTPS)" ;;
  esac
  current=$(incus config get core.https_address)
  if [ -z "$current" ]; then
    incus config set core.https_address="$AGENTCTL_INCUS_HTTPS" || die "cannot listen on $AGENTCTL_INCUS_HTTPS"
    echo "$AGENTCTL_INCUS_HTTPS" >"$OWNED_DIR/https-address"
    say "incusd listens on https://$AGENTCTL_INCUS_HTTPS"
  elif [ "$current" = "$AGENTCTL_INCUS_HTTPS" ]; then
    say "incusd already listens on https://$current"
  else
    say "incusd already listens on https://$current (set before up.sh; left as it is, remote suite uses it)"
  fi
fi
