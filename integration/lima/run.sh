#!/usr/bin/env bash
# The Lima provider for real: agentctl against a real limactl and Apple's
# sandbox-exec on a Mac. It performs the Verify sequence of docs/setup-lima.md
# and then tries every way out of the sandbox it knows:
#   - a direct HTTPS connection (--noproxy '*');
#   - root in the guest flushing the guest's firewall, then connecting directly;
#   - UDP straight to a public resolver;
#   - a service listening on the Mac's own loopback, directly and via the proxy.
# Each must be refused. Nothing here runs unless AGENTCTL_INTEGRATION_LIMA=1.
#
# usage: run.sh /path/to/agentctl
# exit: 0 passed, 1 failed, 77 skipped (ctest SKIP_RETURN_CODE)
set -uo pipefail

AGENTCTL=${1:?usage: run.sh /path/to/agentctl}

skip() { echo "lima integration skipped: $*"; exit 77; }
[ "${AGENTCTL_INTEGRATION_LIMA:-}" = 1 ] || skip "set AGENTCTL_INTEGRATION_LIMA=1 on a Mac with Lima to run it"
[ "$(uname -s)" = Darwin ] || skip "this host is not macOS"
command -v limactl >/dev/null 2>&1 || skip "limactl is not on PATH (brew install lima)"
[ -x /usr/bin/sandbox-exec ] || skip "/usr/bin/sandbox-exec is missing"

NAME="agentctl-it-$$"
WORK=$(mktemp -d)
FAILURES=0
LOOPBACK_PID=""

ac() { "$AGENTCTL" --provider lima "$@"; }
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }

cleanup() {
    [ -n "$LOOPBACK_PID" ] && kill "$LOOPBACK_PID" 2>/dev/null
    ac delete "$NAME" --force >/dev/null 2>&1
    rm -rf "$WORK"
}
trap cleanup EXIT

# expect_ok DESCRIPTION CMD...: the command must succeed.
expect_ok() {
    local what=$1; shift
    if "$@" >"$WORK/out" 2>&1; then pass "$what"; else fail "$what"; sed 's/^/    /' "$WORK/out"; fi
}
# expect_refused DESCRIPTION CMD...: the command must fail.
expect_refused() {
    local what=$1; shift
    if "$@" >"$WORK/out" 2>&1; then fail "$what (it got through)"; sed 's/^/    /' "$WORK/out"; else pass "$what"; fi
}

echo "== create and start (the first boot downloads the image through the proxy)"
expect_ok "create" ac create "$NAME" --image=template://ubuntu-lts --allow=example.com:443 \
    --allow=cloud-images.ubuntu.com:443
if ac start "$NAME" >"$WORK/start" 2>&1; then
    pass "start"
else
    fail "start"; sed 's/^/    /' "$WORK/start"; exit 1
fi
if grep -q "^agentctl: network confinement verified: " "$WORK/start"; then
    pass "start reports network confinement verified"
else
    fail "start did not verify confinement"; sed 's/^/    /' "$WORK/start"
fi
expect_ok "status shows Confinement" sh -c "'$AGENTCTL' --provider lima status '$NAME' | grep -q 'verified'"

echo "== users"
[ "$(ac exec "$NAME" -- whoami 2>/dev/null)" = agent ] && pass "exec runs as agent" || fail "exec is not agent"
[ "$(ac exec --root "$NAME" -- whoami 2>/dev/null)" = root ] && pass "exec --root runs as root" || fail "exec --root is not root"
ac exec "$NAME" -- sh -c 'exit 7'
[ $? -eq 7 ] && pass "exec passes the exit code through" || fail "exec exit code"

echo "== the allowlist, through the proxy"
expect_ok "allowlisted HTTPS via the proxy" ac exec "$NAME" -- curl -fsS -m 30 -o /dev/null https://example.com
expect_refused "non-allowlisted HTTPS via the proxy (403)" \
    ac exec "$NAME" -- curl -fsS -m 30 -o /dev/null https://www.wikipedia.org
expect_ok "the refusal is in the network log" sh -c "'$AGENTCTL' --provider lima logs '$NAME' --network | grep -q wikipedia"

echo "== no way around the proxy"
expect_refused "direct HTTPS (--noproxy '*')" \
    ac exec "$NAME" -- curl --noproxy '*' -sS -m 20 -o /dev/null https://example.com
expect_refused "root flushes the guest firewall, then connects directly" \
    ac exec --root "$NAME" -- sh -c \
    'iptables -P OUTPUT ACCEPT 2>/dev/null; iptables -F 2>/dev/null; nft flush ruleset 2>/dev/null;
     curl --noproxy "*" -sS -m 20 -o /dev/null https://example.com'
# A DNS query for example.com sent straight to 1.1.1.1:53 over UDP; an answer means it got out.
expect_refused "UDP to a public resolver" ac exec "$NAME" -- python3 -c '
import socket
q = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(10)
s.sendto(q, ("1.1.1.1", 53))
s.recvfrom(512)
print("answer received")
'

echo "== the Mac's own loopback"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$PORT" --bind 127.0.0.1 >/dev/null 2>&1 &
LOOPBACK_PID=$!
sleep 1
expect_ok "the Mac service answers on the Mac" curl -fsS -m 5 -o /dev/null "http://127.0.0.1:$PORT/"
expect_refused "guest reaches a Mac loopback service directly" \
    ac exec "$NAME" -- curl --noproxy '*' -fsS -m 20 -o /dev/null "http://192.168.5.2:$PORT/"
expect_refused "guest reaches a Mac loopback service through the proxy" \
    ac exec "$NAME" -- curl -fsS -m 20 -o /dev/null "http://192.168.5.2:$PORT/"

echo "== stop takes the proxy down; delete removes everything"
PIDFILE="${XDG_CONFIG_HOME:-$HOME/.config}/agentctl/lima/$NAME/egress-proxy.pid"
PROXY_PID=$(cat "$PIDFILE" 2>/dev/null)
expect_ok "stop" ac stop "$NAME"
if [ -n "$PROXY_PID" ] && ! kill -0 "$PROXY_PID" 2>/dev/null; then pass "proxy stopped"; else fail "proxy still running"; fi
expect_ok "delete" ac delete "$NAME" --force
if limactl list "$NAME" --json >/dev/null 2>&1; then fail "instance still exists"; else pass "instance removed"; fi

echo "== $FAILURES failure(s)"
[ "$FAILURES" -eq 0 ]
