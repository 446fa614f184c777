#!/usr/bin/env bash
# The Incus cluster suite: `create --target MEMBER` on a real one-member Incus
# cluster, and the refusals around it.
#
# It never clusters the machine's own Incus daemon (`incus cluster enable`
# cannot be undone, and other suites share that daemon). It runs a private
# incusd of its own instead: in a network namespace of its own (its bridges,
# dnsmasq and nftables tables live there and vanish with it), with its own
# INCUS_DIR (state, socket, logs), `dir` storage, the image imported from the
# tarball scripts/incus/up.sh caches (or exported from the shared daemon), and
# core.https_address on 127.0.0.1 inside that namespace, so nothing listens
# outside it. agentctl runs in the same namespace (its egress proxy and
# firewall table must sit beside the sandbox's bridge) and finds the private
# daemon through $INCUS_DIR. Everything is removed at the end.
#
# Checks: --target on a server that is not clustered is refused; after
# `incus cluster enable`, an unknown member is refused naming the members;
# --target MEMBER places the sandbox there (Incus's `location`); status and
# list show the member (text and JSON); the bridge is defined on the member and
# created; egress stays confined (a non-allowlisted name gets 403, a direct
# connection is refused, an allowlisted one works through the proxy); delete
# removes the bridge, also one left pending on the member by an interrupted
# create.
#
# Usage: cluster.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
# AGENTCTL_CLUSTER_PREFIX (default agc-clu) names the namespaces, the daemon's
# directory /var/lib/PREFIX-incus, the member and the sandbox;
# AGENTCTL_CLUSTER_SUBNET_POOL (default 10.231.0.0/16) is the bridges' range.
set -uo pipefail

AGENTCTL=${1:?usage: cluster.sh AGENTCTL_BINARY}
IMAGE=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
TARBALL=${AGENTCTL_CLUSTER_IMAGE_TARBALL:-/var/cache/agentctl-ci/agentctl/images/$IMAGE.tar.zst}
PREFIX=${AGENTCTL_CLUSTER_PREFIX:-agc-clu}
POOL=${AGENTCTL_CLUSTER_SUBNET_POOL:-10.231.0.0/16}
NS=$PREFIX-ns          # the private daemon, its bridges, agentctl and the egress proxy
SRV_NS=$PREFIX-srv     # the "public" test server, behind a veth from $NS
VETH=$PREFIX-v0        # in $NS; its peer $PREFIX-v1 in $SRV_NS
DIR=/var/lib/$PREFIX-incus
MEMBER=$PREFIX-member
S=$PREFIX-a
NET=11.231.0           # routed only between the two namespaces
PUB=$NET.2             # allowed.test and other.test
PORT=8080
INCUSD=/usr/libexec/incus/incusd
WORK=$(mktemp -d /tmp/agentctl-incus-cluster.XXXXXX)
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config XDG_STATE_HOME=$WORK/home/.local/state
export XDG_RUNTIME_DIR=$WORK/run
mkdir -p "$HOME" "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
trap 'rm -rf "$WORK"' EXIT   # until the daemon's cleanup takes over

. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a private incusd in a network namespace)"
command -v incus >/dev/null 2>&1 && [ -x "$INCUSD" ] || skip "Incus is not installed (scripts/incus/up.sh)"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) is needed for the network namespaces"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test server"
command -v nft >/dev/null 2>&1 || skip "nft is needed (scripts/incus/up.sh installs nftables)"
[ ${#PREFIX} -le 12 ] || skip "AGENTCTL_CLUSTER_PREFIX must be at most 12 characters (interface names)"
[ ! -e "$DIR" ] && ! ip netns list | grep -qw -- "$NS" ||
  skip "$DIR or namespace $NS exists already (another run of this suite, or its leftovers)"
if [ ! -r "$TARBALL" ]; then
  # The shared daemon's copy of the image (reading it changes nothing there).
  TARBALL=$WORK/image
  (cd "$WORK" && env -u INCUS_DIR incus image export "$IMAGE" image >/dev/null 2>&1) &&
    TARBALL=$(ls "$WORK"/image* 2>/dev/null | head -n1)
  [ -n "$TARBALL" ] && [ -r "$TARBALL" ] ||
    skip "no copy of the image $IMAGE (scripts/incus/up.sh caches it under /var/cache/agentctl-ci)"
fi

export INCUS_DIR=$DIR   # every incus and agentctl call below talks to the private daemon,
unset INCUS_PROJECT     # in its default project, its only one
in_ns() { ip netns exec "$NS" "$@"; }
# `ip netns exec` mounts a fresh /sys, without the cgroup hierarchies that
# agentctl puts each sandbox's proxy and resolver in: the memory and pids ones
# are mounted again in that command's own mount namespace.
agentctl() {
  in_ns sh -c 'mount -t tmpfs agentctl-cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/memory /sys/fs/cgroup/pids &&
    mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory && mount -t cgroup -o pids cgroup /sys/fs/cgroup/pids &&
    exec "$@"' sh "$AGENTCTL" --provider incus "$@"
}
in_s() { agentctl exec "$S" -- "$@"; }
json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
nothing_made() {  # no instance, no agentctl bridge, no ACL in the private daemon
  [ -z "$(incus list -f csv -c n)" ] && ! incus network list -f csv | grep -q '^agc-' &&
    [ -z "$(incus network acl list -f csv)" ]
}

DAEMON_PID=
SERVER_PID=
cleanup() {
  set +e
  if [ -n "$DAEMON_PID" ]; then
    agentctl delete --force "$S" >/dev/null 2>&1
    for pidfile in "$XDG_STATE_HOME"/agentctl/incus/*/run/egress-proxy.pid; do
      [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
    done
    timeout 90 incus admin shutdown >/dev/null 2>&1
    kill "$DAEMON_PID" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$DAEMON_PID" 2>/dev/null
  fi
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
  ip netns del "$SRV_NS" 2>/dev/null
  ip netns del "$NS" 2>/dev/null
  # The daemon's mounts lived in its own mount namespace; refuse to remove
  # anything if one is still visible here.
  if [ -d "$DIR" ]; then
    if grep -q " $DIR" /proc/mounts; then
      echo "# $DIR still has mounts; left in place"
    else
      rm -rf --one-file-system "$DIR"
    fi
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' TERM INT   # a ctest timeout still removes the daemon and its namespaces

# ---------------------------------------------------------------- a private daemon
T0=$(date +%s%N)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
ip netns add "$NS" || { echo "cannot create network namespace $NS"; exit 1; }
in_ns ip link set lo up
mkdir -m 711 "$DIR"
# `ip netns exec` gives the daemon a fresh /sys (so that it sees its namespace's
# interfaces) without the cgroup file systems under it, which LXC needs for
# the containers' limits: mount them again there, as this suite sees them.
# shellcheck disable=SC2016
in_ns bash -c '
  while read -r source dir type options _; do
    mkdir -p "$dir" && mount -t "$type" -o "$options" "$source" "$dir" || echo "cannot mount $dir"
  done <<<"$2"
  exec "$0" --group incus-admin --logfile="$1/incusd.log"' "$INCUSD" "$DIR" "$(grep ' /sys/fs/cgroup' /proc/self/mounts)" \
  >"$WORK/incusd.out" 2>&1 </dev/null &
DAEMON_PID=$!
if ! timeout 60 incus admin waitready --timeout=60 >/dev/null 2>&1; then
  cat "$WORK/incusd.out"; bad "the private incusd became ready"; finish; exit 1
fi
# Both daemons hand out isolated uid ranges from root's range in /etc/subuid,
# each knowing only its own containers: the private daemon's start near the
# top of that range, so that they never overlap the shared daemon's.
IDMAP_BASE=$(awk -F: '($1 == "root" || $1 == "0") && $3 >= 1048576 && $3 > best {best = $3; base = $2 + $3 - 524288}
  END {if (best) print base}' /etc/subuid)
[ -n "$IDMAP_BASE" ] || skip "root has no uid range of 1048576 or more in /etc/subuid (scripts/incus/up.sh adds one)"
incus admin init --preseed >"$WORK/init.out" 2>&1 <<PRESEED
config:
  images.auto_update_interval: "0"
  core.https_address: 127.0.0.1:8443
storage_pools:
- name: default
  driver: dir
profiles:
- name: default
  config:
    security.idmap.base: "$IDMAP_BASE"
  devices:
    root: {type: disk, path: /, pool: default}
PRESEED
[ $? = 0 ] || { cat "$WORK/init.out"; bad "incus admin init"; finish; exit 1; }
incus image import "$TARBALL" --alias "$IMAGE" >/dev/null || { bad "image import"; finish; exit 1; }
check "the daemon's HTTPS address listens only inside its namespace" bash -c \
  "ip netns exec '$NS' ss -ltn | grep -q '127.0.0.1:8443' && ! ss -ltnp | grep -q 'pid=$DAEMON_PID,'"
echo "# private daemon ready in $(ms "$T0") ms"

"$AGENTCTL" config set "incus.subnetPool=$POOL" >/dev/null || { echo "cannot set incus.subnetPool"; exit 1; }

# ---------------------------------------------------------------- not clustered: --target refused
agentctl create "$S" --image "$IMAGE" --isolation container --mount-none --target "$MEMBER" >"$WORK/standalone.out" 2>&1
check "--target on a server that is not clustered: exit 1" test $? = 1
check "  saying so" grep -q "the Incus server is not a cluster" "$WORK/standalone.out"
check "  and nothing was made" nothing_made

# ---------------------------------------------------------------- a one-member cluster
T1=$(date +%s%N)
incus cluster enable "$MEMBER" >"$WORK/enable.out" 2>&1 || { cat "$WORK/enable.out"; bad "incus cluster enable"; finish; exit 1; }
check "the private daemon is a one-member cluster" bash -c \
  "incus cluster list -f csv | grep -q '^$MEMBER,https://127.0.0.1:8443,'"
echo "# cluster enabled in $(ms "$T1") ms"

agentctl create "$S" --image "$IMAGE" --isolation container --mount-none --target nowhere >"$WORK/unknown.out" 2>&1
check "--target of an unknown member: exit 1" test $? = 1
check "  naming the members" grep -q -- "--target nowhere: the cluster has no such member (its members: $MEMBER)" "$WORK/unknown.out"
check "  and nothing was made" nothing_made

# ---------------------------------------------------------------- the test server, one hop away
ip netns add "$SRV_NS"
ip link add "$VETH" type veth peer name "$PREFIX-v1"
ip link set "$VETH" netns "$NS"
ip link set "$PREFIX-v1" netns "$SRV_NS"
ip -n "$NS" addr add "$NET.1/24" dev "$VETH"
ip -n "$NS" link set "$VETH" up
ip -n "$SRV_NS" addr add "$PUB/24" dev "$PREFIX-v1"
ip -n "$SRV_NS" link set "$PREFIX-v1" up
ip -n "$SRV_NS" link set lo up
ip -n "$SRV_NS" route add default via "$NET.1"
# A default route in the daemon's namespace, as a host has one: the probe
# battery's "outside" address must be routable for the ACL's reject to answer.
ip -n "$NS" route add default via "$PUB"
ip -n "$NS" route get "$PUB" | grep -q "dev $VETH" || { echo "refusing to run: $PUB is not routed to $SRV_NS"; exit 1; }
ip netns exec "$SRV_NS" python3 -c '
import http.server, socketserver, sys
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from %s\n" % self.headers.get("Host")).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
class H(http.server.ThreadingHTTPServer):
    def server_bind(self):  # no reverse DNS lookup
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "test", self.server_address[1]
H((sys.argv[1], int(sys.argv[2])), Hello).serve_forever()' "$PUB" "$PORT" &
SERVER_PID=$!
for _ in $(seq 100); do in_ns bash -c "exec 3<>/dev/tcp/$PUB/$PORT" 2>/dev/null && break; sleep 0.1; done
printf '%s allowed.test\n%s other.test\n' "$PUB" "$PUB" >"$WORK/hosts"
"$AGENTCTL" config set "incus.proxyResolveFile=$WORK/hosts" >/dev/null || { echo "cannot set incus.proxyResolveFile"; exit 1; }

# ---------------------------------------------------------------- create --target MEMBER
T2=$(date +%s%N)
agentctl create "$S" --image "$IMAGE" --isolation container --mount-none --target "$MEMBER" \
  --allow "allowed.test:$PORT" >"$WORK/create.out" 2>&1
rc=$?
echo "# create --target took $(ms "$T2") ms"
if [ $rc -ne 0 ]; then cat "$WORK/create.out"; bad "create --target $MEMBER"; finish; exit 1; fi
ok "create --target $MEMBER"
check "  says where it places the sandbox" grep -q "on cluster member $MEMBER" "$WORK/create.out"
check "  and verifies confinement with the whole probe battery" grep -q "network confinement verified (7/7 probes" "$WORK/create.out"
check "Incus placed it on the member (incus list: location)" \
  test "$(incus list "$S" -f csv -c nL)" = "$S,$MEMBER"
check "its uids come from the top of root's range, apart from the shared daemon's" \
  test "$(incus config get "$S" volatile.idmap.base)" = "$IDMAP_BASE"

agentctl status "$S" >"$WORK/status" 2>&1
check "status shows the member" grep -Eq "^Location: +$MEMBER \(cluster member\)$" "$WORK/status"
check "status --output json: location" \
  test "$(agentctl status "$S" -o json | json_field 'd["location"]')" = "$MEMBER"
agentctl list >"$WORK/list" 2>&1
check "list has a LOCATION column with the member" bash -c \
  "head -n1 '$WORK/list' | grep -q 'LOCATION\$' && grep -Eq '^$S +.* $MEMBER\$' '$WORK/list'"
check "list --output json: location" \
  test "$(agentctl list -o json | json_field '[i["location"] for i in d if i["name"]=="'"$S"'"][0]')" = "$MEMBER"

BR=$(agentctl status "$S" -o json | json_field 'd["extra"]["bridge"]')
check "the bridge was defined on the member and created" bash -c \
  "incus query /1.0/networks/$BR | python3 -c 'import json,sys; n=json.load(sys.stdin); sys.exit(not (n[\"status\"]==\"Created\" and n[\"locations\"]==[\"$MEMBER\"]))'"
check "the bridge carries the sandbox's ACL" test "$(incus network get "$BR" security.acls)" = "agentctl-$S"
check "the bridge and agentctl's firewall table exist only in the daemon's namespace" bash -c \
  "inns() { ip netns exec '$NS' \"\$@\"; }; inns ip link show '$BR' >/dev/null && inns nft list table inet 'agentctl-$BR' >/dev/null &&
   ! ip link show '$BR' >/dev/null 2>&1 && ! nft list table inet 'agentctl-$BR' >/dev/null 2>&1"

# ---------------------------------------------------------------- egress stays confined
check "an allowlisted name is reached through the egress proxy" bash -c \
  "ip netns exec '$NS' '$AGENTCTL' --provider incus exec '$S' -- curl -s -m 10 http://allowed.test:$PORT/ | grep -q 'hello from allowed.test'"
check "another name gets 403 from the proxy" \
  test "$(in_s curl -s -o /dev/null -m 10 -w '%{http_code}' "http://other.test:$PORT/")" = 403
tcp_probe() { tcp_outcome in_s "$@"; }  # tcp_probe HOST PORT, from inside the sandbox
check "a direct connection to the allowed address is refused" test "$(tcp_probe "$PUB" "$PORT")" = refused
GW=$(incus network get "$BR" ipv4.address | cut -d/ -f1)
check "the bridge address on another port is refused" test "$(tcp_probe "$GW" 22)" = refused
# A policy change patches the cluster-wide bridge and ACL.
agentctl policy add "$S" "other.test:$PORT" >"$WORK/policy-add.out" 2>&1
check "policy add on the clustered bridge succeeds" test $? = 0
check "  and confinement is verified again" grep -q "network confinement verified (7/7 probes" "$WORK/policy-add.out"
check "  and is live: the other name now gets through" bash -c \
  "ip netns exec '$NS' '$AGENTCTL' --provider incus exec '$S' -- curl -s -m 10 http://other.test:$PORT/ | grep -q 'hello from other.test'"

# ---------------------------------------------------------------- delete
agentctl delete --force "$S" >"$WORK/delete.out" 2>&1
check "delete succeeds" test $? = 0
check "  the instance is gone" test -z "$(incus list -f csv -c n)"
check "  the bridge is gone from the member" bash -c "! incus network list -f csv | grep -q '^$BR,'"
check "  the ACL is gone" test -z "$(incus network acl list -f csv)"

# Without --target Incus places the sandbox; every member of this cluster is
# this machine, so a confined sandbox is allowed to go wherever it picks.
agentctl create "$S" --image "$IMAGE" --isolation container --mount-none >"$WORK/create-auto.out" 2>&1
rc=$?
check "create without --target: Incus places it (on the only member)" bash -c \
  "[ $rc = 0 ] && [ \"\$(incus list '$S' -f csv -c L)\" = '$MEMBER' ]"
agentctl delete --force "$S" >/dev/null 2>&1
check "  and delete removes it" bash -c "[ -z \"\$(incus list -f csv -c n)\" ] && ! incus network list -f csv | grep -q '^agc-'"

# An interrupted create can leave the bridge defined on members but never
# created (pending, with no config to say whose it is): delete removes it.
incus network create "$BR" --target "$MEMBER" >/dev/null 2>&1
check "a bridge left pending on the member by an interrupted create" \
  test "$(incus query "/1.0/networks/$BR" | json_field 'd["status"]')" = Pending
agentctl delete "$S" >"$WORK/delete-pending.out" 2>&1
rc=$?
check "  is removed by delete" bash -c "[ $rc = 0 ] && ! incus network list -f csv | grep -q '^$BR,'"

echo "# suite ran in $(ms "$T0") ms"
finish
