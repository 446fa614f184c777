#!/usr/bin/env bash
# An Incus server that is not this machine. This machine's daemon (its loopback
# HTTPS listener, scripts/incus/up.sh with AGENTCTL_INCUS_HTTPS) is reached at
# an address of a network namespace the suite makes, through two relays
# (namespace -> veth host side -> loopback), so that agentctl sees a server at
# an address that is none of this host's. Then, as for a server elsewhere:
#   - the egress proxy runs in a companion instance on the sandbox's bridge
#     (incus.proxyPlacement=auto), the bridge's own dnsmasq resolves
#     (raw.dnsmasq), and agentctl makes no nft table and runs no resolver here;
#   - the probe battery skips the probes that need a listener on this host;
#   - host directories cannot be mounted;
# and the sandbox is still confined: an allowlisted name through the proxy, a
# 403 for another, a direct connection refused, and an address the server
# gains after create (on the veth this suite made) is refused by the
# companion's proxy at connect time, from the server's own routing table. Nothing leaves this machine:
# the "public" test hosts are in a second namespace (routes checked first).
#
# Usage: remote_elsewhere.sh AGENTCTL_BINARY   (exit 77 = skipped, with the reason printed)
set -uo pipefail

AGENTCTL=${1:?usage: remote_elsewhere.sh AGENTCTL_BINARY}
IMAGE=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
HERE=$(cd "$(dirname "$0")" && pwd)
TAG=$$
REMOTE=elsewhere
S=itest-rel-$TAG                    # the sandbox
RNS=agrn$TAG RVH=agr${TAG}h RVN=agr${TAG}n
RNET=10.246.$((TAG % 250 + 1))   # /30: .1 this host's veth end, .2 the "server"
NS=agpn$TAG VETH_HOST=agp${TAG}h VETH_NS=agp${TAG}n
NET=11.221.$((TAG % 250 + 1))    # the "public" test hosts
PUB=$NET.2 PORT=8080
GAINED=11.222.$((TAG % 250 + 1)).9 CANARY_PORT=8090   # an address the server gains after create (a public one)
WORK=$(mktemp -d /tmp/agentctl-incus-elsewhere.XXXXXX)
. "$HERE/lib.sh"
require_incus "network namespaces, and it trusts a client certificate on the daemon"
command -v openssl >/dev/null 2>&1 || skip "openssl is needed to make the client certificate"
LISTEN=$(incus config get core.https_address)
case "$LISTEN" in
  127.*:*) ;;
  *) skip "the daemon has no HTTPS listener on a loopback IPv4 address (scripts/incus/up.sh with AGENTCTL_INCUS_HTTPS=127.0.0.1:8443)" ;;
esac
SERVER_CERT=/var/lib/incus/server.crt
[ -e /var/lib/incus/cluster.crt ] && SERVER_CERT=/var/lib/incus/cluster.crt
[ -r "$SERVER_CERT" ] || skip "cannot read the daemon's certificate $SERVER_CERT"

export INCUS_CONF=$WORK/incus HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config XDG_STATE_HOME=$WORK/home/.local/state
mkdir -p "$INCUS_CONF/servercerts" "$HOME"
TRUSTED="" RELAYS=() CANARY=""
cleanup() {
  set +e
  "$AGENTCTL" --provider incus --remote "$REMOTE" delete --force "$S" >/dev/null 2>&1
  for pid in "${RELAYS[@]}"; do kill "$pid" 2>/dev/null; done
  [ -n "$CANARY" ] && kill "$CANARY" 2>/dev/null
  [ -n "$TRUSTED" ] && incus config trust remove "$TRUSTED" >/dev/null 2>&1
  stop_public_hosts "$NS" "$VETH_HOST"
  ip netns del "$RNS" 2>/dev/null
  ip link del "$RVH" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---------------------------------------------------------------- the server "elsewhere"
remove_leftover_namespaces agrn agr
remove_leftover_namespaces agpn agp
ip netns add "$RNS" || { echo "cannot create a network namespace"; exit 1; }
ip link add "$RVH" type veth peer name "$RVN"
ip link set "$RVN" netns "$RNS"
ip addr add "$RNET.1/30" dev "$RVH"
ip link set "$RVH" up
ip -n "$RNS" link set lo up
ip -n "$RNS" addr add "$RNET.2/30" dev "$RVN"
ip -n "$RNS" link set "$RVN" up
ip route get "$RNET.2" | grep -q "dev $RVH" || { echo "refusing to run: $RNET.2 is not routed to the test namespace"; exit 1; }
python3 "$(dirname "$0")/tcp_relay.py" relay "$RNET.1" 8444 "${LISTEN%:*}" "${LISTEN##*:}" &
RELAYS+=($!)
for _ in $(seq 50); do bash -c "exec 3<>/dev/tcp/$RNET.1/8444" 2>/dev/null && break; sleep 0.1; done
ip netns exec "$RNS" python3 "$(dirname "$0")/tcp_relay.py" relay "$RNET.2" 8443 "$RNET.1" 8444 &
RELAYS+=($!)
for _ in $(seq 50); do bash -c "exec 3<>/dev/tcp/$RNET.2/8443" 2>/dev/null && break; sleep 0.1; done

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:secp384r1 -nodes -days 2 \
  -keyout "$INCUS_CONF/client.key" -out "$INCUS_CONF/client.crt" -subj "/CN=agentctl-itest-$TAG" >/dev/null 2>&1
incus config trust add-certificate "$INCUS_CONF/client.crt" --name "itest-elsewhere-$TAG" >/dev/null 2>&1 ||
  { echo "cannot trust the test's client certificate"; exit 1; }
TRUSTED=$(openssl x509 -in "$INCUS_CONF/client.crt" -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr 'A-F' 'a-f')
cp "$SERVER_CERT" "$INCUS_CONF/servercerts/$REMOTE.crt"
printf 'default-remote: local\nremotes:\n  %s:\n    addr: https://%s:8443\n    protocol: incus\n' "$REMOTE" "$RNET.2" \
  >"$INCUS_CONF/config.yml"
agentctl() { "$AGENTCTL" --provider incus --remote "$REMOTE" "$@"; }

out=$(agentctl -v list 2>&1)
check "agentctl takes the server for another machine" grep -q "using the remote $REMOTE at https://$RNET.2:8443 (another machine)" <<<"$out"

# ---------------------------------------------------------------- test hosts, names
start_public_hosts "$NS" "$VETH_HOST" "$VETH_NS" "$NET" "$PUB" || exit 1
printf '%s allowed.test\n%s other.test\n%s canary.test\n' "$PUB" "$PUB" "$GAINED" >"$WORK/hosts"
"$AGENTCTL" config set "incus.proxyResolveFile=$WORK/hosts" >/dev/null
"$AGENTCTL" config set incus.subnetPool=10.222.0.0/16 >/dev/null

# ---------------------------------------------------------------- refusals
mkdir -p "$WORK/dir"
out=$(agentctl create "$S-m" --image "$IMAGE" --isolation container --mount "$WORK/dir:/work" 2>&1); rc=$?
check "a host directory cannot be mounted on a server elsewhere (exit $rc)" test $rc = 1
check "and the error says why" grep -qi "not this machine" <<<"$out"
check "nothing was made for it" bash -c "! incus info '$S-m' >/dev/null 2>&1"
"$AGENTCTL" config set incus.proxyPlacement=host >/dev/null
out=$(agentctl create "$S-h" --image "$IMAGE" --isolation container --mount-none 2>&1); rc=$?
check "incus.proxyPlacement=host is refused for a server elsewhere (exit $rc)" bash -c "[ $rc = 1 ] && grep -q 'incus.proxyPlacement=host' <<<\"\$1\"" _ "$out"
"$AGENTCTL" config set incus.proxyPlacement=auto >/dev/null

# ---------------------------------------------------------------- create
t0=$(date +%s%N)
agentctl create "$S" --image "$IMAGE" --isolation container --mount-none --allow allowed.test:$PORT \
  --allow canary.test:$CANARY_PORT >"$WORK/create.out" 2>&1
rc=$?
echo "# create $S took $(( ($(date +%s%N) - t0) / 1000000 )) ms"
if [ $rc -ne 0 ]; then cat "$WORK/create.out"; bad "create $S"; finish; exit 1; fi
ok "create $S on a server elsewhere"
C=$S-egress
check "the proxy runs in the companion instance" grep -q "egress proxy of $S in instance $C" "$WORK/create.out"
check "no resolver of agentctl's is started here" bash -c "! grep -q 'starting the resolver' '$WORK/create.out'"
check "confinement verified, the probes that need this host skipped and counted" \
  grep -Eq "network confinement verified \([0-9]+/[0-9]+ probes, 3 skipped" "$WORK/create.out"
BR=$(agentctl status "$S" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["extra"]["bridge"])')
check "the bridge's own dnsmasq resolves, with the allowlist" bash -c \
  "incus network get '$BR' raw.dnsmasq | grep -q 'server=/allowed.test/' && incus network get '$BR' ipv4.dhcp | grep -qx true"
check "agentctl made no nft table on this host" bash -c "! nft list table inet 'agentctl-$BR' >/dev/null 2>&1"
# (Incus's own dnsmasq for the bridge does run here: the "server" is this machine's daemon.)
check "agentctl runs no proxy or resolver on this host for it" bash -c \
  "! pgrep -f '[e]gress-proxy .*--sandbox $S\$' >/dev/null && ! pgrep -f '[d]nsmasq .*--pid-file=$XDG_STATE_HOME/agentctl/incus/$S/' >/dev/null"
agentctl status "$S" >"$WORK/status" 2>&1
check "status: the proxy in its instance, running" grep -Eq "^Egress proxy: .*instance $C, running" "$WORK/status"
check "status: the resolver is the bridge's dnsmasq" grep -q "^Resolver: .*the bridge's dnsmasq" "$WORK/status"

# ---------------------------------------------------------------- still confined
in_s() { agentctl exec "$S" -- "$@"; }
check "an allowlisted name through the companion's proxy" grep -q "hello from $PUB" <<<"$(in_s curl -s -m 10 http://allowed.test:$PORT/)"
check "another name gets 403" test "$(in_s curl -s -o /dev/null -m 10 -w '%{http_code}' http://other.test:$PORT/)" = 403
check "a direct connection to the allowed address is refused" test "$(in_s bash -c \
  "timeout 5 bash -c 'exec 3<>/dev/tcp/$PUB/$PORT' 2>/dev/null && echo connected || echo refused")" = refused

# ---------------------------------------------------------------- an address the server gains after create
# The server (this machine) gains an address on the veth this suite made, and
# a service listens on it; canary.test (allowlisted since create) resolves to
# it. The companion's proxy refuses it at connect time: the server's own
# table, mounted into the companion, has it now.
check "the companion has the server's routing table, read-only" bash -c \
  "incus exec '$C' -- grep -q 'host LOCAL' /opt/agentctl-server/fib_trie && \
   [ \"\$(incus config device get '$C' server-routes readonly)\" = true ]"
ip addr add "$GAINED/32" dev "$RVH"
python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"canary on the server\n"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
' "$GAINED" "$CANARY_PORT" &
CANARY=$!
canary_up() { curl -s -m 2 "http://$GAINED:$CANARY_PORT/" | grep -q canary; }
wait_until 50 canary_up
check "the server's new address answers on this machine (the canary is up)" canary_up
check "an address the server gained after create is refused through the companion (403)" \
  test "$(in_s curl -s -o /dev/null -m 10 -w '%{http_code}' http://canary.test:$CANARY_PORT/)" = 403
check "and nothing of the canary reached the sandbox" bash -c \
  "! '$AGENTCTL' --provider incus --remote '$REMOTE' exec '$S' -- curl -s -m 10 http://canary.test:$CANARY_PORT/ | grep -q 'canary on the server'"
logged() { agentctl logs "$S" --network 2>&1 | tr -s ' \n' '  ' | grep -q "canary.test.*host-address"; }
wait_until 10 logged
agentctl logs "$S" --network 2>&1 | grep -A1 canary | sed 's/^/# /'
check "the refusal is logged as the server's own address" logged

# ---------------------------------------------------------------- delete
agentctl delete --force "$S" >/dev/null 2>&1
check "delete removes the sandbox, its companion and its bridge" bash -c \
  "! incus info '$S' >/dev/null 2>&1 && ! incus info '$C' >/dev/null 2>&1 && ! incus network show '$BR' >/dev/null 2>&1"

finish
