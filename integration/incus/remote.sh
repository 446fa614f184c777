#!/usr/bin/env bash
# The Incus integration suite over HTTPS: this machine's daemon, listening on a
# loopback address (scripts/incus/up.sh with AGENTCTL_INCUS_HTTPS), is used as
# an Incus remote the way the incus client uses one: a private incus client
# configuration (INCUS_CONF) with a generated client certificate that the
# daemon is told to trust, config.yml naming the remote, and the daemon's
# certificate pinned in servercerts/. Then suite.sh runs again with every
# agentctl command on that remote (the same tests, the other transport), then
# exec.sh (stdin and exit codes over a TLS websocket), and
# the refusals are checked: an untrusted client certificate, a pinned server
# certificate that is not the server's, an unpinned and untrusted server, an
# unreachable port and an unknown remote. Nothing leaves this machine.
#
# Usage: remote.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

AGENTCTL=${1:?usage: remote.sh AGENTCTL_BINARY}
IMAGE=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
HERE=$(cd "$(dirname "$0")" && pwd)
TAG=$$
REMOTE=itest-https
WORK=$(mktemp -d /tmp/agentctl-incus-remote.XXXXXX)
. "$HERE/lib.sh"
require_incus "it trusts a client certificate on the daemon"
command -v openssl >/dev/null 2>&1 || skip "openssl is needed to make the client certificates"
LISTEN=$(incus config get core.https_address)
[ -n "$LISTEN" ] || skip "the daemon has no HTTPS listener (core.https_address; scripts/incus/up.sh sets one with AGENTCTL_INCUS_HTTPS=127.0.0.1:8443)"
case "$LISTEN" in
  127.*:* | "[::1]:"*) ;;
  *) skip "the daemon's HTTPS listener $LISTEN is not on a loopback address; this suite only talks to loopback" ;;
esac
SERVER_CERT=/var/lib/incus/server.crt
[ -e /var/lib/incus/cluster.crt ] && SERVER_CERT=/var/lib/incus/cluster.crt  # what a clustered daemon presents
[ -r "$SERVER_CERT" ] || skip "cannot read the daemon's certificate $SERVER_CERT"

export INCUS_CONF=$WORK/incus HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config
mkdir -p "$INCUS_CONF/servercerts" "$INCUS_CONF/clientcerts" "$HOME"
newcert() {  # newcert BASE CN: a self-signed EC certificate and key, as `incus remote add` makes
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:secp384r1 -nodes -days 2 \
    -keyout "$1.key" -out "$1.crt" -subj "/CN=$2" >/dev/null 2>&1
}
fingerprint() { openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr 'A-F' 'a-f'; }

TRUSTED=""
cleanup() {
  set +e
  [ -n "$TRUSTED" ] && incus config trust remove "$TRUSTED" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

newcert "$INCUS_CONF/client" "agentctl-itest-$TAG"
incus config trust add-certificate "$INCUS_CONF/client.crt" --name "itest-remote-$TAG" >/dev/null ||
  { echo "cannot trust the test's client certificate"; exit 1; }
TRUSTED=$(fingerprint "$INCUS_CONF/client.crt")
cp "$SERVER_CERT" "$INCUS_CONF/servercerts/$REMOTE.crt"

# The refusals' remotes: each differs from the good one in exactly one thing.
newcert "$WORK/stranger" "agentctl-itest-stranger-$TAG"
cp "$SERVER_CERT" "$INCUS_CONF/servercerts/untrusted.crt"
cp "$WORK/stranger.crt" "$INCUS_CONF/clientcerts/untrusted.crt"
cp "$WORK/stranger.key" "$INCUS_CONF/clientcerts/untrusted.key"
cp "$WORK/stranger.crt" "$INCUS_CONF/servercerts/wrongpin.crt"
CLOSED_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cp "$SERVER_CERT" "$INCUS_CONF/servercerts/closed.crt"
cat >"$INCUS_CONF/config.yml" <<YAML
default-remote: local
remotes:
  $REMOTE:
    addr: https://$LISTEN
    protocol: incus
    auth_type: tls
    public: false
  untrusted:
    addr: https://$LISTEN
    protocol: incus
  wrongpin:
    addr: https://$LISTEN
    protocol: incus
  nopin:
    addr: https://$LISTEN
    protocol: incus
  closed:
    addr: https://127.0.0.1:$CLOSED_PORT
    protocol: incus
YAML
check "the incus client itself reaches the remote" bash -c "incus query $REMOTE:/1.0 | grep -q '\"auth\": \"trusted\"'"

# ---------------------------------------------------------------- the refusals
refusal() {  # refusal WHAT REMOTE PATTERN: exit 1, and stderr matches PATTERN
  local out rc
  out=$("$AGENTCTL" --provider incus --remote "$2" list 2>&1); rc=$?
  if [ $rc = 1 ] && tr '\n' ' ' <<<"$out" | grep -Eq "$3"; then ok "$1"; else bad "$1 (exit $rc): $out"; fi
}
refusal "an untrusted client certificate is refused, with the trust command" untrusted \
  'does not trust this client.s certificate .*clientcerts/untrusted.crt.*incus config trust add-certificate'
refusal "a server certificate that is not the pinned one is refused, naming the pin" wrongpin \
  'not the one pinned in .*servercerts/wrongpin.crt'
refusal "an unpinned server with a certificate no CA vouches for is refused" nopin \
  'does not trust .*none is pinned for it in .*servercerts/nopin.crt'
refusal "an unreachable server is named with its port" closed "cannot reach the Incus server at 127.0.0.1:$CLOSED_PORT .*refused"
refusal "an unknown remote lists the known ones" nosuch 'unknown Incus remote "nosuch" \(known: closed, itest-https, local, nopin, untrusted, wrongpin'
out=$("$AGENTCTL" --provider incus --remote "$REMOTE" -v list 2>&1)
check "-v names the endpoint" grep -q "using the remote $REMOTE at https://$LISTEN (this machine)" <<<"$out"
out=$("$AGENTCTL" --provider incus --remote "$REMOTE" --preview stop itest-nothing-$TAG 2>/dev/null)
check "--preview addresses the remote (in the environment's project)" \
  grep -Eq "^incus query -X GET '?$REMOTE:/1.0/instances/itest-nothing-$TAG${INCUS_PROJECT:+\\?project=$INCUS_PROJECT}'?\$" <<<"$out"
"$AGENTCTL" config set incus.remote=nosuch >/dev/null
out=$("$AGENTCTL" --provider incus list 2>&1)
check "incus.remote in the configuration chooses the remote" grep -q 'unknown Incus remote "nosuch"' <<<"$out"
out=$("$AGENTCTL" --provider incus --remote "$REMOTE" list -o json 2>/dev/null)
check "--remote wins over incus.remote" python3 -c 'import json,sys; json.loads(sys.argv[1])' "$out"
echo "# refusals: $PASS passed, $FAIL failed"

# ---------------------------------------------------------------- the suite, over HTTPS
start=$(date +%s)
AGENTCTL_REMOTE=$REMOTE bash "$HERE/suite.sh" "$AGENTCTL"
rc=$?
echo "# the suite over HTTPS took $(( $(date +%s) - start )) s"
case $rc in
  0) ok "the integration suite passes over HTTPS" ;;
  77) bad "the integration suite skipped over HTTPS" ;;
  *) bad "the integration suite fails over HTTPS" ;;
esac

# exec's stdin, exit codes and the rest go over a TLS websocket here.
AGENTCTL_REMOTE=$REMOTE bash "$HERE/exec.sh" "$AGENTCTL"
case $? in
  0) ok "the exec suite passes over HTTPS" ;;
  77) bad "the exec suite skipped over HTTPS" ;;
  *) bad "the exec suite fails over HTTPS" ;;
esac

finish
