#!/usr/bin/env bash
# create --agent for every agent in the catalog, end to end and offline,
# against the real Incus daemon (containers).
#
# Each agent's installer host names (and the npm registry) are served over
# HTTPS by a test host in a network namespace the suite makes, reached through
# the sandbox's egress proxy with the proxy's resolve file: every installer is
# a stand-in script that downloads a stand-in binary from another of the
# agent's hosts. The sandboxes start from a copy of the test image that trusts
# the suite's own certificate authority. Checked per agent: the install, the
# agent on the PATH of `exec` and of a login shell, owned by the sandbox user,
# and its hosts in the allowlist. Then the failures: the installer fails (an
# HTTP error, a failing script), the binary is missing, a host is refused, a
# tool the installer needs is missing; each fails create naming the step and
# leaves nothing behind (or keeps it with --keep-on-failure). And the uid: the
# agent's user is the one the writable mounts map to.
#
# Usage: agents.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
S=itest-ag-$TAG          # the sandboxes: $S-AGENT, $S-fail...
TIMG=itest-agents-$TAG   # the image copy that trusts the test CA
BUILDER=itest-agimg-$TAG
test_namespace ag31 221
ORIGIN=$NET.2
require_incus "network namespaces, nftables, the Incus admin socket"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test origin"
command -v openssl >/dev/null 2>&1 || skip "openssl is needed for the test origin's certificates"

MADE=()
cleanup() {
  set +e
  for n in "${MADE[@]}"; do "$AGENTCTL" --provider incus delete --force "$n" >/dev/null 2>&1; done
  incus delete --force "$BUILDER" >/dev/null 2>&1
  incus image delete "$TIMG" >/dev/null 2>&1
  [ -n "${ORIGIN_PID:-}" ] && kill "$ORIGIN_PID" 2>/dev/null
  stop_public_hosts "$NS" "$VETH_HOST"
  rm -rf "$WORK"
}
trap cleanup EXIT

# Every host name an installer reaches, from the catalog (docs/agents.md lists the same).
HOSTS="claude.ai downloads.claude.ai chatgpt.com releases.openai.com opencode.ai github.com pi.dev nodejs.org
cursor.com api2.cursor.sh registry.npmjs.org elsewhere.test"
for h in $HOSTS; do echo "$ORIGIN $h"; done >"$WORK/hosts"
config_set incus.subnetPool=10.221.0.0/16
config_set "incus.proxyResolveFile=$WORK/hosts"

# ---------------------------------------------------------------- the certificate authority and the origin
san=$(for h in $HOSTS; do printf 'DNS:%s,' "$h"; done)
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=agentctl test CA $TAG" \
  -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null &&
  openssl req -newkey rsa:2048 -nodes -subj "/CN=agentctl test origin" -keyout "$WORK/origin.key" \
    -out "$WORK/origin.csr" 2>/dev/null &&
  openssl x509 -req -in "$WORK/origin.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
    -extfile <(printf 'subjectAltName=%s\n' "${san%,}") -out "$WORK/origin.pem" 2>/dev/null ||
  { echo "cannot make the test certificates"; exit 1; }

# The stand-in npm package: a tarball whose bin is `gemini`.
mkdir -p "$WORK/pkg/package/bin"
printf '{"name":"@google/gemini-cli","version":"9.9.9","bin":{"gemini":"bin/gemini.js"}}\n' >"$WORK/pkg/package/package.json"
printf '#!/usr/bin/env node\nconsole.log("gemini 9.9.9 (agentctl test stand-in)")\n' >"$WORK/pkg/package/bin/gemini.js"
chmod 755 "$WORK/pkg/package/bin/gemini.js"
tar -czf "$WORK/gemini-cli-9.9.9.tgz" -C "$WORK/pkg" package

# The origin: per host and path an installer or a stand-in binary. $WORK/mode
# picks how the installers behave: ok, http-error, installer-fails,
# no-binary, refused-host.
echo ok >"$WORK/mode"
ORIGIN_PY='
import hashlib, http.server, json, os, socketserver, ssl, sys
work, addr = sys.argv[1], sys.argv[2]
# agent: (installer host, path, binary host, directory below $HOME)
agents = {
    "claude": ("claude.ai", "/install.sh", "downloads.claude.ai", ".local/bin"),
    "codex": ("chatgpt.com", "/codex/install.sh", "releases.openai.com", ".local/bin"),
    "opencode": ("opencode.ai", "/install", "github.com", ".opencode/bin"),
    "pi": ("pi.dev", "/install.sh", "nodejs.org", ".local/bin"),
    "cursor-agent": ("cursor.com", "/install", "api2.cursor.sh", ".local/bin"),
}
def installer(binary, bin_host, directory, mode):
    if mode == "installer-fails":
        return "echo \"stand-in installer: no space left on device\" >&2\nexit 3\n"
    if mode == "no-binary":
        return "echo \"stand-in installer: done\"\n"
    host = "elsewhere.test" if mode == "refused-host" else bin_host
    return ("set -e\nmkdir -p \"$HOME/%s\"\ncurl -fsSL https://%s/bin/%s -o \"$HOME/%s/%s\"\n"
            "chmod 755 \"$HOME/%s/%s\"\necho \"stand-in installer: installed %s\"\n"
            % (directory, host, binary, directory, binary, directory, binary, binary))
class Origin(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body, kind="text/plain"):
        self.send_response(code); self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_GET(self):
        host = (self.headers.get("Host") or "").split(":")[0]
        mode = open(os.path.join(work, "mode")).read().strip()
        with open(os.path.join(work, "requests"), "a") as log: log.write("%s %s\n" % (host, self.path))
        for binary, (ihost, path, bhost, directory) in agents.items():
            if host == ihost and self.path == path:
                if mode == "http-error": return self.reply(404, b"not here\n")
                return self.reply(200, installer(binary, bhost, directory, mode).encode())
            if host == bhost and self.path == "/bin/" + binary:
                return self.reply(200, ("#!/bin/sh\necho \"%s 9.9.9 (agentctl test stand-in)\"\n" % binary).encode())
        if host == "registry.npmjs.org":
            tgz = open(os.path.join(work, "gemini-cli-9.9.9.tgz"), "rb").read()
            if self.path.endswith(".tgz"): return self.reply(200, tgz, "application/octet-stream")
            if self.path.startswith("/@google"):
                url = "https://registry.npmjs.org/@google/gemini-cli/-/gemini-cli-9.9.9.tgz"
                dist = {"tarball": url, "shasum": hashlib.sha1(tgz).hexdigest()}
                doc = {"name": "@google/gemini-cli", "dist-tags": {"latest": "9.9.9"},
                       "versions": {"9.9.9": {"name": "@google/gemini-cli", "version": "9.9.9",
                                              "bin": {"gemini": "bin/gemini.js"}, "dist": dist}}}
                return self.reply(200, json.dumps(doc).encode(), "application/json")
        self.reply(404, b"no such thing here\n")
    def log_message(self, *a): pass
class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    allow_reuse_address = True; daemon_threads = True
    def server_bind(self):
        socketserver.TCPServer.server_bind(self); self.server_name, self.server_port = "origin", 443
server = Server((addr, 443), Origin)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(os.path.join(work, "origin.pem"), os.path.join(work, "origin.key"))
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
'
remove_leftover_namespaces ag31n ag31
make_test_namespace "$NS" "$VETH_HOST" "$VETH_NS" "$NET" "$ORIGIN" || exit 1
ip netns exec "$NS" python3 -c "$ORIGIN_PY" "$WORK" "$ORIGIN" &
ORIGIN_PID=$!
wait_until 30 curl -sf --cacert "$WORK/ca.pem" --resolve "claude.ai:443:$ORIGIN" https://claude.ai/install.sh ||
  { echo "the test origin does not answer"; exit 1; }
ok "the test origin serves the installers over HTTPS"

# ---------------------------------------------------------------- the image copy that trusts the test CA
if ! incus init -q "$IMAGE" "$BUILDER" >/dev/null 2>&1 ||
  ! incus file pull "$BUILDER/etc/ssl/certs/ca-certificates.crt" "$WORK/bundle.crt" ||
  ! cat "$WORK/ca.pem" >>"$WORK/bundle.crt" ||
  ! incus file push -q "$WORK/bundle.crt" "$BUILDER/etc/ssl/certs/ca-certificates.crt" ||
  ! printf 'cafile=/etc/ssl/certs/ca-certificates.crt\n' >"$WORK/npmrc" ||
  ! incus file push -q "$WORK/npmrc" "$BUILDER/etc/npmrc" ||
  ! incus publish "$BUILDER" --alias "$TIMG" >/dev/null; then
  bad "a copy of $IMAGE that trusts the test CA"; finish; exit 1
fi
HAS_NPM=$(incus file pull "$BUILDER/usr/bin/npm" "$WORK/npm-probe" >/dev/null 2>&1 && echo yes || echo no)
incus delete --force "$BUILDER" >/dev/null
# What the image carries, as agentctl's image build records it: what the
# test image has (curl, and Node.js and npm only when it has them).
carried="systemd-sysv udev curl python3-minimal iproute2 sudo ca-certificates"
[ "$HAS_NPM" = yes ] && carried="$carried nodejs npm"
incus image set-property "$TIMG" agentctl.packages "$carried" || { bad "set the image's package list"; finish; exit 1; }

# create_agent NAME AGENT ARGS...: create --agent into $WORK/NAME.out; its exit code.
create_agent() {
  local name=$1 agent=$2
  shift 2
  MADE+=("$name")
  agentctl create "$name" --image "$TIMG" --isolation container --agent "$agent" "$@" >"$WORK/$name.out" 2>&1
}

# ---------------------------------------------------------------- every agent installs and runs
# A writable mount owned by uid 1500, the uid of the image's own sandbox user:
# the agent's user must be the one the mount maps to (it was 1501 before).
mkdir -p "$WORK/app"
chown 1500:1500 "$WORK/app"
for pair in claude:claude codex:codex opencode:opencode pi:pi cursor:cursor-agent gemini:gemini; do
  agent=${pair%%:*} bin=${pair#*:} name=$S-$agent
  if [ "$agent" = gemini ] && [ "$HAS_NPM" != yes ]; then
    echo "# not run: gemini installs with npm, and $IMAGE has no npm (an image built by this agentctl has)"
    continue
  fi
  mounts=(--mount-none)
  [ "$agent" = claude ] && mounts=(--mount-only --mount "$WORK/app:/workspace:w")
  t0=$(date +%s%N)
  if ! create_agent "$name" "$agent" "${mounts[@]}"; then
    cat "$WORK/$name.out"; bad "create --agent $agent"; continue
  fi
  ok "create --agent $agent ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
  check "  $bin --version runs through agentctl exec" \
    grep -qx "$bin 9.9.9 (agentctl test stand-in)" <(agentctl exec "$name" -- "$bin" --version 2>&1)
  check "  and in a login shell" \
    grep -qx "$bin 9.9.9 (agentctl test stand-in)" <(agentctl exec "$name" -- bash -lc "$bin --version" 2>&1)
  check "  the sandbox user is $agent" test "$(agentctl exec "$name" -- id -un)" = "$agent"
  check "  the agent belongs to the sandbox user" \
    test "$(agentctl exec "$name" -- sh -c "stat -L -c %U \"\$(command -v $bin)\"")" = "$agent"
  check "  status: installed" bash -c "agentctl status '$name' | grep -Eq 'agent.installed: +true'"
  check "  the allowlist has the agent's hosts, with their origin" \
    bash -c "agentctl status '$name' -o json | python3 -c '
import json, sys
allow = json.load(sys.stdin)[\"network\"][\"allow\"]
sys.exit(not any(\"agent $agent\" in json.dumps(a) for a in allow))'"
  if [ "$agent" = claude ]; then
    check "  the sandbox user has the uid the writable mount maps to (1500)" \
      test "$(agentctl exec "$name" -- id -u)" = 1500
    agentctl exec "$name" -- touch /workspace/made-by-claude
    check "  a file it makes in the mount belongs to the mount's owner on the host" \
      test "$(stat -c %u "$WORK/app/made-by-claude" 2>/dev/null)" = 1500
  fi
  agentctl delete --force "$name" >/dev/null 2>&1
done

# ---------------------------------------------------------------- failures leave nothing behind
# fails MODE STEP-TEXT WHAT: create --agent claude with the origin in MODE
# fails (exit 1), names STEP-TEXT, and leaves nothing behind.
fails() {
  local mode=$1 step=$2 what=$3 name=$S-$1
  echo "$mode" >"$WORK/mode"
  create_agent "$name" claude --mount-none; local rc=$?
  check "$what: create fails (exit $rc)" test "$rc" = 1
  check "  naming the step: $(grep -m1 'installing claude' "$WORK/$name.out")" \
    grep -q "installing claude in \"$name\" failed while $step" "$WORK/$name.out"
  check "  leaving nothing behind: $(leftovers_of "$name" | tr '\n' ' ')" test -z "$(leftovers_of "$name")"
}
fails http-error "running the installer (exit code 22)" "the installer's download fails (HTTP 404)"
check "  quoting curl's last words" grep -q "curl: (22)" "$WORK/$S-http-error.out"
fails installer-fails "running the installer (exit code 3)" "the installer fails"
check "  quoting the installer's last output" grep -q "no space left on device" "$WORK/$S-installer-fails.out"
fails no-binary "finding claude on the sandbox user's PATH" "the installer succeeds but installs nothing"
fails refused-host "running the installer" "the installer fetches from a host the allowlist refuses"
check "  which the proxy refused" grep -q "403" "$WORK/$S-refused-host.out"

echo installer-fails >"$WORK/mode"
create_agent "$S-kept" claude --mount-none --keep-on-failure; rc=$?
check "--keep-on-failure: create still fails (exit $rc)" test "$rc" = 1
check "  and keeps the sandbox to look into" bash -c "agentctl list -q | grep -qx '$S-kept'"
check "  where the agent is recorded as not installed" \
  bash -c "agentctl status '$S-kept' | grep -Eq 'agent.installed: +false'"
echo ok >"$WORK/mode"
check "  and start retries the install" agentctl start "$S-kept"
check "  which then counts" bash -c "agentctl exec '$S-kept' -- claude --version | grep -q 'stand-in'"
agentctl delete --force "$S-kept" >/dev/null 2>&1

# A tool the installer needs and the image lacks: refused before anything is made.
if [ "$HAS_NPM" != yes ]; then
  create_agent "$S-npm" gemini --mount-none; rc=$?
  check "gemini on an image without npm is refused (exit $rc)" test "$rc" = 1
  check "  naming the tool and how to get it" \
    grep -q "the installer of gemini needs node and npm, which the image $TIMG does not have" "$WORK/$S-npm.out"
  check "  before anything was made" bash -c "! grep -q 'creating' '$WORK/$S-npm.out'"
  check "  so nothing is left: $(leftovers_of "$S-npm" | tr '\n' ' ')" test -z "$(leftovers_of "$S-npm")"
fi
# An image that does not say what it carries is asked from inside, right before the install.
incus image set-property "$TIMG" agentctl.packages "" >/dev/null 2>&1
incus image unset-property "$TIMG" agentctl.packages >/dev/null 2>&1
if [ "$HAS_NPM" != yes ]; then
  create_agent "$S-npm2" gemini --mount-none; rc=$?
  check "gemini on an image that does not list its packages fails in the tool step (exit $rc)" test "$rc" = 1
  check "  naming the tool: $(grep -m1 'needs' "$WORK/$S-npm2.out")" \
    grep -q "the installer of gemini needs node and npm, which sandbox $S-npm2 does not have" "$WORK/$S-npm2.out"
  check "  and leaves nothing behind: $(leftovers_of "$S-npm2" | tr '\n' ' ')" test -z "$(leftovers_of "$S-npm2")"
fi

finish
