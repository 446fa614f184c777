#!/usr/bin/env bash
# create --agent for every agent in the catalog, end to end and offline,
# against the real Incus daemon (containers).
#
# Each agent's installer host names, nodejs.org and the npm registry are
# served over HTTPS by a test host in a network namespace the suite makes
# (agent_origin.sh, agent_origin.py), reached through the sandbox's egress
# proxy with the proxy's resolve file: the curl installers are stand-in
# scripts that download a stand-in binary from another of the agent's hosts;
# the npm agents (gemini, and pi, whose installer brings Node.js from
# nodejs.org) install packages from the stand-in registry whose bin is a
# stand-in script. The sandboxes start from copies of the test image that trust
# the suite's own certificate authority, one of them with Node.js and npm.
# Checked per agent: the install, the agent on the PATH of `exec` and of a
# login shell, owned by the sandbox user, and its hosts in the allowlist. Then
# the failures: the installer fails (an HTTP error, a failing script), the
# binary is missing, a host is refused, the registry has no such package, the
# package is on a host the allowlist refuses, a tool the installer needs is
# missing; each fails create naming the step and leaves nothing behind (or
# keeps it with --keep-on-failure). And the uid: the agent's user is the one
# the writable mounts map to.
#
# Usage: agents.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/agent_origin.sh"
suite_start "$@"
S=itest-ag-$TAG          # the sandboxes: $S-AGENT, $S-fail...
TIMG=itest-agents-$TAG   # the image copy that trusts the test CA
NIMG=itest-agnode-$TAG   # ... with Node.js and npm
test_namespace ag31 221
require_incus "network namespaces, nftables, the Incus admin socket"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test origin"
command -v openssl >/dev/null 2>&1 || skip "openssl is needed for the test origin's certificates"

MADE=()
cleanup() {
  set +e
  for n in "${MADE[@]}"; do "$AGENTCTL" --provider incus delete --force "$n" >/dev/null 2>&1; done
  incus delete --force "itest-agimg-$TAG" >/dev/null 2>&1
  incus image delete "$TIMG" >/dev/null 2>&1
  incus image delete "$NIMG" >/dev/null 2>&1
  agent_origin_stop
  rm -rf "$WORK"
}
trap cleanup EXIT

config_set incus.subnetPool=10.221.0.0/16
config_set "incus.proxyResolveFile=$WORK/hosts"
remove_leftover_namespaces ag31n ag31
agent_origin_start || exit 1
ok "the test origin serves the installers and the npm registry over HTTPS"

# The image copies that trust the test CA: $TIMG as the test image is (its
# agentctl.packages says what it carries), $NIMG with Node.js and npm added.
agent_origin_image "$IMAGE" "$TIMG" || { bad "a copy of $IMAGE that trusts the test CA"; finish; exit 1; }
HAS_NPM=$AGENT_IMAGE_NPM
if [ "$HOST_NODE" = yes ]; then
  agent_origin_image "$IMAGE" "$NIMG" node || { bad "a copy of $IMAGE with Node.js and npm"; finish; exit 1; }
elif [ "$HAS_NPM" = yes ]; then
  NIMG=$TIMG
else
  NIMG=
fi

# create_agent NAME AGENT ARGS...: create --agent from image ${IMG:-$TIMG}
# into $WORK/NAME.out; its exit code.
create_agent() {
  local name=$1 agent=$2
  shift 2
  MADE+=("$name")
  agentctl create "$name" --image "${IMG:-$TIMG}" --isolation container --agent "$agent" "$@" >"$WORK/$name.out" 2>&1
}
# served PATH...: the origin's registry was asked GET PATH, for each PATH.
served() {
  local path
  for path in "$@"; do grep -qxF "registry.npmjs.org $path" "$WORK/requests" || return 1; done
}

# ---------------------------------------------------------------- every agent installs and runs
# A writable mount owned by uid 1500, the uid of the image's own sandbox user:
# the agent's user must be the one the mount maps to (it was 1501 before).
mkdir -p "$WORK/app"
chown 1500:1500 "$WORK/app"
for pair in claude:claude codex:codex opencode:opencode pi:pi cursor:cursor-agent gemini:gemini; do
  agent=${pair%%:*} bin=${pair#*:} name=$S-$agent
  IMG=$TIMG
  if [ "$agent" = gemini ]; then
    if [ -z "$NIMG" ]; then
      bad "gemini installs with npm: neither $IMAGE nor this host has Node.js and npm to test it with"
      continue
    fi
    IMG=$NIMG
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
  case $agent in
    claude)
      check "  the sandbox user has the uid the writable mount maps to (1500)" \
        test "$(agentctl exec "$name" -- id -u)" = 1500
      agentctl exec "$name" -- touch /workspace/made-by-claude
      check "  a file it makes in the mount belongs to the mount's owner on the host" \
        test "$(stat -c %u "$WORK/app/made-by-claude" 2>/dev/null)" = 1500 ;;
    gemini)
      check "  npm asked the registry for the package and fetched its tarball" \
        served /@google%2fgemini-cli /@google/gemini-cli/-/gemini-cli-9.9.9.tgz
      check "  and installed it in the sandbox user's npm prefix" \
        test "$(agentctl exec "$name" -- sh -c 'readlink -f "$(command -v gemini)"')" = \
        /home/gemini/.npm-global/lib/node_modules/@google/gemini-cli/bin/cli.js ;;
    pi)
      check "  its installer brought Node.js from nodejs.org into an image without it" \
        bash -c "grep -qxF 'nodejs.org /dist/stand-in/node-linux-x64.tar.gz' '$WORK/requests' &&
          test \"\$(agentctl exec '$name' -- sh -c 'command -v node')\" = /home/pi/.local/bin/node"
      check "  and pi from the registry" \
        served /@mariozechner%2fpi-coding-agent /@mariozechner/pi-coding-agent/-/pi-coding-agent-9.9.9.tgz ;;
  esac
  agentctl delete --force "$name" >/dev/null 2>&1
done
IMG=

# ---------------------------------------------------------------- failures leave nothing behind
# fails MODE AGENT STEP-TEXT WHAT: create --agent AGENT (from ${IMG:-$TIMG})
# with the origin in MODE fails (exit 1), names STEP-TEXT, and leaves nothing behind.
fails() {
  local mode=$1 agent=$2 step=$3 what=$4 name=$S-$1
  echo "$mode" >"$WORK/mode"
  create_agent "$name" "$agent" --mount-none; local rc=$?
  check "$what: create fails (exit $rc)" test "$rc" = 1
  check "  naming the step: $(grep -m1 "installing $agent" "$WORK/$name.out")" \
    grep -q "installing $agent in \"$name\" failed while $step" "$WORK/$name.out"
  check "  leaving nothing behind: $(leftovers_of "$name" | tr '\n' ' ')" test -z "$(leftovers_of "$name")"
}
fails http-error claude "running the installer (exit code 22)" "the installer's download fails (HTTP 404)"
check "  quoting curl's last words" grep -q "curl: (22)" "$WORK/$S-http-error.out"
fails installer-fails claude "running the installer (exit code 3)" "the installer fails"
check "  quoting the installer's last output" grep -q "no space left on device" "$WORK/$S-installer-fails.out"
fails no-binary claude "finding claude on the sandbox user's PATH" "the installer succeeds but installs nothing"
fails refused-host claude "running the installer" "the installer fetches from a host the allowlist refuses"
check "  which the proxy refused" grep -q "403" "$WORK/$S-refused-host.out"
if [ -n "$NIMG" ]; then
  IMG=$NIMG fails npm-missing gemini "running the installer (exit code 1)" \
    "gemini: the registry has no such package"
  check "  quoting npm's 404" grep -q "E404" "$WORK/$S-npm-missing.out"
  IMG=$NIMG fails npm-refused-host gemini "running the installer (exit code 1)" \
    "gemini: the package's tarball is on a host the allowlist refuses"
  check "  which the proxy refused" grep -q "403" "$WORK/$S-npm-refused-host.out"
fi
echo npm-missing >"$WORK/mode"
create_agent "$S-pi-missing" pi --mount-none; rc=$?
check "pi: the registry has no such package: create fails (exit $rc)" test "$rc" = 1
check "  naming the step and quoting npm's 404" bash -c "grep -q 'installing pi in \"$S-pi-missing\" failed while running the installer' \
  '$WORK/$S-pi-missing.out' && grep -q E404 '$WORK/$S-pi-missing.out'"
check "  leaving nothing behind: $(leftovers_of "$S-pi-missing" | tr '\n' ' ')" test -z "$(leftovers_of "$S-pi-missing")"

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
