#!/usr/bin/env bash
# The Incus credential suite: a secret stays on the host. The sandbox's
# variable holds a placeholder; its egress proxy puts the real value into
# requests to the host the secret is bound to, and to no other. Drives the
# built agentctl against the real Incus daemon (a container) and a test HTTPS
# origin (its own test CA, trusted by the proxy through incus.proxyUpstreamCA)
# in a network namespace the suite creates; names resolve through the proxy's
# resolve file. Then searches the guest's files, environments and process
# arguments, the host's process arguments, the logs, status and a preview for
# the value. A `git clone` over HTTPS in the guest, from a git origin that
# takes only a second secret's real value as its Basic password, works only
# because the proxy puts that value in place of the guest's placeholder.
#
# Usage: secrets.sh AGENTCTL_BINARY TLS_ORIGIN_BINARY   (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
ORIGIN_BIN=${2:?usage: secrets.sh AGENTCTL_BINARY TLS_ORIGIN_BINARY}
A=itest-s28-$TAG
test_namespace ag28 228
API=$NET.2     # api.secret.test: the secret is bound to it
OTHER=$NET.3   # other.test: allowed, not bound
GITHOST=$NET.4 # git.secret.test: a git origin, the secret s28git is bound to it
require_incus "network namespaces, nftables, the Incus admin socket"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test servers"
command -v openssl >/dev/null 2>&1 || skip "the openssl tool is needed for the test origin's certificates"
command -v git >/dev/null 2>&1 || skip "git is needed for the test git origin (git http-backend)"

ORIGIN_PIDS=()
cleanup() {
  set +e
  for pid in "${ORIGIN_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  "$AGENTCTL" --provider incus delete --force "$A" >/dev/null 2>&1
  stop_public_hosts "$NS" "$VETH_HOST"
  rm -rf "$WORK"
}
trap cleanup EXIT

# The value: random per run, never on a command line (grep reads it from a file).
VALUE="s28v-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
GIT_VALUE="s28g-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$VALUE" "$GIT_VALUE" >"$WORK/value.pattern"
printf '%s\n' "$GIT_VALUE" >"$WORK/git-token"
has_value() { grep -aqsFf "$WORK/value.pattern" "$@"; }
export -f has_value
export WORK

"$AGENTCTL" config set incus.subnetPool=10.228.0.0/16 >/dev/null || { echo "cannot set incus.subnetPool"; exit 1; }
printf '%s api.secret.test\n%s other.test\n%s git.secret.test\n' "$API" "$OTHER" "$GITHOST" >"$WORK/hosts"
"$AGENTCTL" config set "incus.proxyResolveFile=$WORK/hosts" >/dev/null || { echo "cannot set incus.proxyResolveFile"; exit 1; }

# ---------------------------------------------------------------- the test origin and its CA
(
  cd "$WORK" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout origin-ca.key -out origin-ca.crt \
      -subj /CN=agentctl-test-origin-ca -days 2 -addext basicConstraints=critical,CA:TRUE \
      -addext keyUsage=critical,keyCertSign &&
    printf 'subjectAltName=DNS:api.secret.test,DNS:other.test,DNS:git.secret.test\nauthorityKeyIdentifier=keyid\n' >origin.ext &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout origin.key -out origin.csr \
      -subj /CN=api.secret.test &&
    openssl x509 -req -in origin.csr -CA origin-ca.crt -CAkey origin-ca.key -CAcreateserial -out origin.crt -days 2 \
      -extfile origin.ext
) >/dev/null 2>&1 || { echo "cannot make the test origin's certificates"; exit 1; }
"$AGENTCTL" config set "incus.proxyUpstreamCA=$WORK/origin-ca.crt" >/dev/null || { echo "cannot set incus.proxyUpstreamCA"; exit 1; }

remove_leftover_namespaces ag28n ag28
start_public_hosts "$NS" "$VETH_HOST" "$VETH_NS" "$NET" "$API" "$OTHER" "$GITHOST" || exit 1
ORIGIN_PIDS+=("$PUBLIC_PID")
for host in api:$API other:$OTHER; do
  ip netns exec "$NS" "$ORIGIN_BIN" "${host#*:}:443" "$WORK/origin.crt" "$WORK/origin.key" "$WORK/origin-${host%%:*}.log" \
    >"$WORK/origin-${host%%:*}.out" 2>&1 &
  ORIGIN_PIDS+=($!)
  wait_until 10 grep -q listening "$WORK/origin-${host%%:*}.out" || { echo "the test origin ${host%%:*} did not start"; exit 1; }
done
# The git origin: one repository, served only to the git secret's real value.
(
  git init -q "$WORK/src" && echo "s28 cloned content" >"$WORK/src/README" && git -C "$WORK/src" add README &&
    git -C "$WORK/src" -c user.name=agentctl -c user.email=test@agentctl.invalid commit -qm one &&
    git clone -q --bare "$WORK/src" "$WORK/git/repo.git"
) >/dev/null 2>&1 || { echo "cannot make the test repository"; exit 1; }
ip netns exec "$NS" python3 "$(dirname "$0")/git_origin.py" "$GITHOST" "$WORK/origin.crt" "$WORK/origin.key" \
  "$WORK/git" "$WORK/git-token" "$WORK/origin-git.log" >"$WORK/origin-git.out" 2>&1 &
ORIGIN_PIDS+=($!)
wait_until 10 grep -q listening "$WORK/origin-git.out" || { echo "the git origin did not start"; cat "$WORK/origin-git.out"; exit 1; }

# ---------------------------------------------------------------- the secret and the sandbox
printf '%s' "$VALUE" | agentctl secret set s28token --host api.secret.test --header authorization >"$WORK/set.out" 2>&1
check "secret set stores the value without printing it" bash -c "grep -q 'secret s28token stored' '$WORK/set.out' && ! grep -aqFf '$WORK/value.pattern' '$WORK/set.out'"

agentctl --preview create "$A" --image "$IMAGE" --isolation container --mount-none --allow api.secret.test:443 \
  --secret s28token=S28_TOKEN >"$WORK/preview.out" 2>&1
check "create --preview never shows the value" bash -c "! has_value '$WORK/preview.out'"

printf '%s' "$GIT_VALUE" | agentctl secret set s28git --host git.secret.test --header authorization >/dev/null 2>&1

agentctl create "$A" --image "$IMAGE" --isolation container --mount-none \
  --allow api.secret.test:443 --allow other.test:443 --allow git.secret.test:443 \
  --secret s28token=S28_TOKEN --secret s28git=GH_TOKEN >"$WORK/create.out" 2>&1
rc=$?
check "create with --secret works" test "$rc" = 0
[ "$rc" = 0 ] || { cat "$WORK/create.out"; finish; exit 1; }
check "create's output never shows the value" bash -c "! has_value '$WORK/create.out'"

PH=$(agentctl exec "$A" -- printenv S28_TOKEN)
check "the guest's variable holds a placeholder of this sandbox and secret" bash -c "[[ '$PH' == agentctl-secret-s28token-* ]]"
check "a login shell sees the same placeholder" test "$(agentctl exec "$A" -- bash -lc 'printenv S28_TOKEN')" = "$PH"

# ---------------------------------------------------------------- injection
code=$(agentctl exec "$A" -- sh -c 'curl -sS -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $S28_TOKEN" https://api.secret.test/v1/user')
check "curl with the placeholder to the bound host succeeds, trusting the sandbox CA" test "$code" = 200
check "the bound host received the real value" grep -qF "Authorization: Bearer $VALUE" "$WORK/origin-api.log"
check "the bound host never received the placeholder" bash -c "! grep -qF '$PH' '$WORK/origin-api.log'"
agentctl exec "$A" -- sh -c 'curl -sS -o /dev/null -u "x-access-token:$S28_TOKEN" https://api.secret.test/o/r.git/info/refs' >/dev/null
basic=$(printf 'x-access-token:%s' "$VALUE" | base64 -w0)
check "git's Basic credentials carry the real value to the bound host" grep -qF "Authorization: Basic $basic" "$WORK/origin-api.log"

code=$(agentctl exec "$A" -- sh -c 'curl -sS -o /dev/null -w "%{http_code}" -H "X-Leak: $S28_TOKEN" https://api.secret.test/')
check "the placeholder in another header to the bound host is refused (403)" test "$code" = 403

# Another allowed host: an opaque tunnel. The guest does not trust the test
# origin's CA, so -k: the point is what arrives there.
agentctl exec "$A" -- sh -c 'curl -sSk -o /dev/null -H "Authorization: Bearer $S28_TOKEN" https://other.test/' >/dev/null
check "the placeholder sent to another allowed host arrives untouched" grep -qF "Authorization: Bearer $PH" "$WORK/origin-other.log"
check "that host never receives the value" bash -c "! has_value '$WORK/origin-other.log'"
check "no sandbox certificate is presented for it (the tunnel is opaque)" bash -c "! agentctl exec '$A' -- curl -sS -o /dev/null https://other.test/ 2>/dev/null"

# ---------------------------------------------------------------- git over HTTPS with a token binding
# As docs/agents.md tells: a credential helper hands git the variable (the
# placeholder) as its password; git sends it in Basic credentials.
GPH=$(agentctl exec "$A" -- printenv GH_TOKEN)
check "GH_TOKEN holds the git secret's placeholder" bash -c "[[ '$GPH' == agentctl-secret-s28git-* ]]"
check "the image has git" agentctl exec "$A" -- sh -c 'git --version >/dev/null'
agentctl exec "$A" -- bash -c 'git config --global credential.https://git.secret.test.helper "!f() { test \"\$1\" = get && echo username=x-access-token && echo \"password=\$GH_TOKEN\"; }; f"'
agentctl exec "$A" -- sh -c 'cd && git clone -q https://git.secret.test/repo.git clone' >"$WORK/clone.out" 2>&1
check "git clone over HTTPS with the token binding works" bash -c "agentctl exec '$A' -- sh -c 'cat ~/clone/README' | grep -qx 's28 cloned content'"
basic=$(printf 'x-access-token:%s' "$GIT_VALUE" | base64 -w0)
check "the git origin took the real value in git's Basic credentials" grep -qF "auth=ok Basic $basic" "$WORK/origin-git.log"
ph_basic=$(printf 'x-access-token:%s' "$GPH" | base64 -w0)
check "the git origin never received the placeholder" bash -c "! grep -qF '$ph_basic' '$WORK/origin-git.log'"
# The same clone with any other password is refused by the origin: only the proxy's value opens it.
check "a clone with another token is refused by the git origin" bash -c "! agentctl exec '$A' -- sh -c 'cd && GH_TOKEN=not-the-token git clone -q https://git.secret.test/repo.git refused' >/dev/null 2>&1"
check "that clone reached the origin and was refused there" grep -q "auth=wrong" "$WORK/origin-git.log"
agentctl logs --network "$A" -o json >"$WORK/network-git.log" 2>&1
check "logs --network marks the git requests with the git secret's name" grep -q '"secrets":"s28git"' "$WORK/network-git.log"

# ---------------------------------------------------------------- rotation: live, no restart
VALUE2="s28r-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$VALUE2" >>"$WORK/value.pattern"
proxy_pid_before=$(agentctl status "$A" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["egressProxy"]["pid"])')
printf '%s' "$VALUE2" | agentctl secret set s28token --host api.secret.test --header authorization >"$WORK/rotate.out" 2>&1
check "secret set tells the running sandbox's proxy" grep -q "$A: rotated s28token" "$WORK/rotate.out"
agentctl exec "$A" -- sh -c 'curl -sS -o /dev/null -H "Authorization: Bearer $S28_TOKEN" https://api.secret.test/rotated' >/dev/null
check "the next request carries the new value" grep -qF "Authorization: Bearer $VALUE2" "$WORK/origin-api.log"
proxy_pid_after=$(agentctl status "$A" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["egressProxy"]["pid"])')
check "the proxy was not restarted" test "$proxy_pid_before" = "$proxy_pid_after"
agentctl status "$A" >"$WORK/status-bindings.out" 2>&1
check "status shows the binding (variable, host, header), not the value" bash -c "grep -q 'S28_TOKEN, injected into api.secret.test (authorization)' '$WORK/status-bindings.out' && ! has_value '$WORK/status-bindings.out'"

# ---------------------------------------------------------------- the value is nowhere but the host's store and the proxy
PID=$(incus query "/1.0/instances/$A/state?project=${INCUS_PROJECT:-default}" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
check "the guest's init is found" test "${PID:-0}" -gt 1
[ "${PID:-0}" -gt 1 ] || { finish; exit 1; }  # the searches below need it
check "the value is in no file of the guest" bash -c "! grep -rlsFf '$WORK/value.pattern' --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev /proc/$PID/root/ | grep -q ."
guest_ns=$(readlink "/proc/$PID/ns/pid")
leaked=0
for p in /proc/[0-9]*; do
  [ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$guest_ns" ] || continue
  has_value "$p/environ" "$p/cmdline" && leaked=1
done
check "the value is in no guest process's environment or arguments" test "$leaked" = 0
check "the value is in no host process's arguments" bash -c "! grep -alsFf '$WORK/value.pattern' /proc/[0-9]*/cmdline | grep -q ."
agentctl logs --network "$A" -o json >"$WORK/network.log" 2>&1
check "logs --network marks the injection by the secret's name" grep -q '"secrets":"s28token"' "$WORK/network.log"
check "logs --network never shows the value" bash -c "! has_value '$WORK/network.log'"
agentctl status "$A" >"$WORK/status.out" 2>&1
agentctl secret list -o json >"$WORK/list.out" 2>&1
check "status and secret list never show the value" bash -c "! has_value '$WORK/status.out' '$WORK/list.out'"
STATE_FILE=$XDG_STATE_HOME/agentctl/secrets/s28token.json
check "the stored secret is mode 0600" test "$(stat -c %a "$STATE_FILE")" = 600
check "the sandbox CA's key is mode 0600 on the host" test "$(stat -c %a "$XDG_STATE_HOME/agentctl/incus/$A/egress-ca.key")" = 600
check "the guest holds the CA certificate but no key" bash -c "test -s /proc/$PID/root/usr/local/share/ca-certificates/agentctl-sandbox.crt && ! grep -rlsq 'PRIVATE KEY' /proc/$PID/root/usr/local/share/ca-certificates/"

finish
