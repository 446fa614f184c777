#!/usr/bin/env bash
# up.sh - bring up a local Incus daemon for agentctl on a Debian 12 host
# without systemd as PID 1, and import a locally built Debian image.
#
# Idempotent: every step checks whether it is already done. Run as root.
#   1. packages from bookworm-backports (incus, dnsmasq-base, debootstrap, btrfs-progs, zstd)
#   2. lxcfs (optional) and incusd started by hand, PIDs kept in $AGENTCTL_INCUS_RUN
#   3. preseed: a storage pool and a default profile WITHOUT a network. agentctl
#      gives every sandbox its own managed bridge, so no shared network exists.
#   4. a Debian 12 image built with debootstrap, its tarball cached in
#      $AGENTCTL_INCUS_CACHE between runs, imported with alias $AGENTCTL_INCUS_IMAGE
#
# Environment (all optional):
#   AGENTCTL_INCUS_RUN    state dir for pid files and logs   (/run/agentctl-incus)
#   AGENTCTL_INCUS_CACHE  image tarball cache                (/var/cache/agentctl-ci)
#   AGENTCTL_INCUS_IMAGE  image alias                        (agentctl-debian-12)
#   AGENTCTL_INCUS_POOL   storage driver: btrfs | dir        (btrfs)
#   AGENTCTL_INCUS_POOL_SIZE  size of the btrfs loop file    (8GiB)
#   AGENTCTL_DEBIAN_MIRROR    Debian mirror                  (http://deb.debian.org/debian)
#   AGENTCTL_INCUS_MAP_IDS    host uids/gids root may map into sandboxes (1000 1500)
set -euo pipefail

RUN_DIR=${AGENTCTL_INCUS_RUN:-/run/agentctl-incus}
CACHE_DIR=${AGENTCTL_INCUS_CACHE:-/var/cache/agentctl-ci}
IMAGE_ALIAS=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
POOL_DRIVER=${AGENTCTL_INCUS_POOL:-btrfs}
POOL_SIZE=${AGENTCTL_INCUS_POOL_SIZE:-8GiB}
MIRROR=${AGENTCTL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
IMAGE_PACKAGES=systemd-sysv,udev,curl,python3-minimal,iproute2,sudo,ca-certificates

export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=600 -y -q)
START=$(date +%s%N)
say() { local ds=$(( ($(date +%s%N) - START) / 100000000 )); printf '[%4d.%ds] %s\n' $((ds / 10)) $((ds % 10)) "$*"; }
die() { echo "up.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts incusd)"
mkdir -p "$RUN_DIR" "$CACHE_DIR"

# ---------------------------------------------------------------- 1. packages
have_incusd() { [ -x /usr/libexec/incus/incusd ] && command -v incus >/dev/null 2>&1; }
missing=()
have_incusd || missing+=(incus-base incus-client)
command -v dnsmasq >/dev/null 2>&1 || missing+=(dnsmasq-base)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
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
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
mkdir -p /var/log/incus /var/lib/lxcfs
if command -v lxcfs >/dev/null 2>&1 && ! mountpoint -q /var/lib/lxcfs; then
  setsid lxcfs /var/lib/lxcfs >"$RUN_DIR/lxcfs.log" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/lxcfs.pid"
  for _ in $(seq 50); do mountpoint -q /var/lib/lxcfs && break; sleep 0.1; done
fi
if ! incus admin waitready --timeout=1 >/dev/null 2>&1; then
  getent group incus-admin >/dev/null || groupadd --system incus-admin
  setsid /usr/libexec/incus/incusd --group incus-admin --logfile=/var/log/incus/incusd.log \
    >"$RUN_DIR/incusd.out" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/incusd.pid"
  incus admin waitready --timeout=60 || { tail -20 "$RUN_DIR/incusd.out" >&2; die "incusd did not become ready"; }
fi
alive "$RUN_DIR/incusd.pid" || pgrep -x incusd >"$RUN_DIR/incusd.pid" || true
say "incusd ready (pid $(cat "$RUN_DIR/incusd.pid" 2>/dev/null || echo unknown))"

# ---------------------------------------------------------------- 3. storage + profile
if ! incus storage show default >/dev/null 2>&1; then
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

# ---------------------------------------------------------------- 4. image
if ! incus image alias list -f csv | cut -d, -f1 | grep -qx "$IMAGE_ALIAS"; then
  tarball="$CACHE_DIR/$IMAGE_ALIAS.tar.zst"
  if [ ! -s "$tarball" ]; then
    build=$(mktemp -d "$CACHE_DIR/build.XXXXXX")
    trap 'rm -rf "$build"' EXIT
    root="$build/rootfs"
    debootstrap --variant=minbase --include="$IMAGE_PACKAGES" bookworm "$root" "$MIRROR" \
      >"$RUN_DIR/debootstrap.log" 2>&1 || { tail -20 "$RUN_DIR/debootstrap.log" >&2; die "debootstrap failed"; }
    say "debootstrap done"
    # eth0 by DHCP through systemd-networkd (udev must be present or eth0 stays down).
    printf '[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n' \
      >"$root/etc/systemd/network/10-eth0.network"
    chroot "$root" systemctl enable systemd-networkd systemd-resolved >/dev/null 2>&1 \
      || chroot "$root" systemctl enable systemd-networkd >/dev/null 2>&1
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/*
    : >"$root/etc/machine-id"
    mkdir -p "$build/templates"
    cat >"$build/metadata.yaml" <<META
architecture: x86_64
creation_date: $(date +%s)
properties:
  description: Debian 12 minbase (agentctl)
  os: debian
  release: bookworm
  architecture: amd64
templates:
  /etc/hostname: {when: [create, copy], template: hostname.tpl}
  /etc/hosts: {when: [create, copy], template: hosts.tpl}
META
    echo '{{ instance.name }}' >"$build/templates/hostname.tpl"
    printf '127.0.0.1 localhost\n127.0.1.1 {{ instance.name }}\n::1 localhost ip6-localhost ip6-loopback\n' \
      >"$build/templates/hosts.tpl"
    tar --numeric-owner --xattrs -I 'zstd -T0 -3' -cf "$tarball.tmp" -C "$build" metadata.yaml templates rootfs
    mv "$tarball.tmp" "$tarball"
    rm -rf "$build"; trap - EXIT
    say "image tarball built: $tarball ($(du -h "$tarball" | cut -f1))"
  fi
  incus image import "$tarball" --alias "$IMAGE_ALIAS" >/dev/null
fi
say "image '$IMAGE_ALIAS' ready"
