# shellcheck shell=bash disable=SC2034  # sets variables for the suites that source it
# The agents' offline origin (agent_origin.py) and the image copies that trust
# it, for the suites that install agents. Source it after lib.sh, with WORK,
# TAG, NS, VETH_HOST, VETH_NS and NET set (suite_start, test_namespace).
#
#   agent_origin_start    certificates, the stand-in npm packages and Node.js
#                         distribution, the resolve file ($WORK/hosts, every
#                         installer host at $ORIGIN), the namespace and the
#                         server. Sets ORIGIN, ORIGIN_PID and HOST_NODE (yes when
#                         this host has node and npm to hand out). Returns 1
#                         with a message when it cannot.
#   agent_origin_image BASE ALIAS [node]
#                         publishes ALIAS: a copy of image BASE that trusts the
#                         origin's certificate authority, with this host's node
#                         and npm in /usr when `node` is given, and the
#                         agentctl.packages property saying what it carries.
#                         Sets AGENT_IMAGE_NPM (yes when BASE has npm itself).
#   agent_origin_stop     removes what agent_origin_start made.

# Every host name an installer reaches, from the catalog (docs/agents.md lists the same).
AGENT_ORIGIN_HOSTS="claude.ai downloads.claude.ai chatgpt.com releases.openai.com opencode.ai github.com pi.dev
nodejs.org cursor.com api2.cursor.sh registry.npmjs.org elsewhere.test"

# agent_origin_package NAME BIN: the stand-in npm package NAME (version 9.9.9)
# in $WORK/npm, whose bin BIN prints "BIN 9.9.9 (agentctl test stand-in)".
agent_origin_package() {
  local dir=$WORK/npm/src-$2
  mkdir -p "$dir/package/bin"
  printf '{"name":"%s","version":"9.9.9","bin":{"%s":"bin/cli.js"}}\n' "$1" "$2" >"$dir/package/package.json"
  printf '#!/usr/bin/env node\nconsole.log("%s 9.9.9 (agentctl test stand-in)")\n' "$2" >"$dir/package/bin/cli.js"
  chmod 755 "$dir/package/bin/cli.js"
  tar -czf "$WORK/npm/${1##*/}-9.9.9.tgz" -C "$dir" package
}

agent_origin_start() {
  ORIGIN=$NET.2
  local h san
  for h in $AGENT_ORIGIN_HOSTS; do echo "$ORIGIN $h"; done >"$WORK/hosts"
  san=$(for h in $AGENT_ORIGIN_HOSTS; do printf 'DNS:%s,' "$h"; done)
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=agentctl test CA $TAG" \
    -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null &&
    openssl req -newkey rsa:2048 -nodes -subj "/CN=agentctl test origin" -keyout "$WORK/origin.key" \
      -out "$WORK/origin.csr" 2>/dev/null &&
    openssl x509 -req -in "$WORK/origin.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
      -extfile <(printf 'subjectAltName=%s\n' "${san%,}") -out "$WORK/origin.pem" 2>/dev/null ||
    { echo "cannot make the test certificates"; return 1; }

  agent_origin_package @google/gemini-cli gemini
  agent_origin_package @mariozechner/pi-coding-agent pi
  # Node.js for the images and for nodejs.org: this host's node and npm, laid
  # out as a Node.js distribution (bin/, lib/node_modules/npm), whose npm
  # trusts the system's certificate bundle (which has the test CA).
  HOST_NODE=no
  local node npm_dir
  node=$(readlink -f "$(command -v node 2>/dev/null)" 2>/dev/null)
  npm_dir=$(readlink -f "$(command -v npm 2>/dev/null)" 2>/dev/null)
  npm_dir=${npm_dir%/bin/npm-cli.js}
  if [ -x "$node" ] && [ -f "$npm_dir/package.json" ]; then
    mkdir -p "$WORK/node/node-stand-in/bin" "$WORK/node/node-stand-in/lib/node_modules"
    cp "$node" "$WORK/node/node-stand-in/bin/node"
    cp -a "$npm_dir" "$WORK/node/node-stand-in/lib/node_modules/npm"
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "$WORK/node/node-stand-in/bin/npm"
    # npm's own (builtin) configuration: read whatever the prefix is.
    printf 'cafile=/etc/ssl/certs/ca-certificates.crt\nupdate-notifier=false\nfund=false\naudit=false\n' \
      >>"$WORK/node/node-stand-in/lib/node_modules/npm/npmrc"
    tar -czf "$WORK/node.tgz" -C "$WORK/node" node-stand-in && HOST_NODE=yes
  fi

  echo ok >"$WORK/mode"
  make_test_namespace "$NS" "$VETH_HOST" "$VETH_NS" "$NET" "$ORIGIN" || return 1
  # A session of its own: it outlives a caller that ends its process group.
  setsid ip netns exec "$NS" python3 "$(dirname "${BASH_SOURCE[0]}")/agent_origin.py" "$WORK" "$ORIGIN" \
    </dev/null 3>&- &
  ORIGIN_PID=$!
  wait_until 30 curl -sf --cacert "$WORK/ca.pem" --resolve "claude.ai:443:$ORIGIN" https://claude.ai/install.sh ||
    { echo "the test origin does not answer"; return 1; }
}

agent_origin_image() {
  local base=$1 alias=$2 node=${3:-} builder=itest-agimg-$TAG
  local carried
  # What the base image carries (`image build` records it), and what is added below.
  carried=$(incus image get-property "$base" agentctl.packages 2>/dev/null) ||
    { echo "the base image $base does not record what it carries (agentctl.packages): build it with agentctl image build"; return 1; }
  incus init -q "$base" "$builder" >/dev/null 2>&1 &&
    incus file pull "$builder/etc/ssl/certs/ca-certificates.crt" "$WORK/bundle.crt" &&
    cat "$WORK/ca.pem" >>"$WORK/bundle.crt" &&
    incus file push -q "$WORK/bundle.crt" "$builder/etc/ssl/certs/ca-certificates.crt" &&
    printf 'cafile=/etc/ssl/certs/ca-certificates.crt\nupdate-notifier=false\nfund=false\naudit=false\n' \
      >"$WORK/npmrc" &&
    incus file push -q "$WORK/npmrc" "$builder/etc/npmrc" &&
    incus file push -q -p "$WORK/npmrc" "$builder/usr/etc/npmrc" || { incus delete --force "$builder" >/dev/null 2>&1; return 1; }
  AGENT_IMAGE_NPM=no
  incus file pull "$builder/usr/bin/npm" "$WORK/npm-probe" >/dev/null 2>&1 && AGENT_IMAGE_NPM=yes
  [ "$AGENT_IMAGE_NPM" = yes ] && carried="$carried nodejs npm"
  if [ -n "$node" ]; then
    local d=$WORK/node/node-stand-in
    incus file push -q "$d/bin/node" "$builder/usr/bin/node" &&
      incus file push -q -r -p "$d/lib/node_modules/npm" "$builder/usr/lib/node_modules/" &&
      printf '#!/bin/sh\nexec /usr/bin/node /usr/lib/node_modules/npm/bin/npm-cli.js "$@"\n' >"$WORK/npm-wrapper" &&
      incus file push -q --mode 0755 "$WORK/npm-wrapper" "$builder/usr/bin/npm" || { incus delete --force "$builder" >/dev/null 2>&1; return 1; }
    [ "$AGENT_IMAGE_NPM" = yes ] || carried="$carried nodejs npm"
  fi
  # Its accounts are the base's (recorded by `image build`): the copy records
  # them as its own.
  local fingerprint
  incus publish "$builder" --alias "$alias" >/dev/null &&
    incus image set-property "$alias" agentctl.packages "$carried" &&
    fingerprint=$(incus image info "$alias" | awk '/^Fingerprint:/ {print $2}') &&
    incus image set-property "$alias" agentctl.accounts.of "$fingerprint"
  local rc=$?
  incus delete --force "$builder" >/dev/null 2>&1
  return $rc
}

agent_origin_stop() {
  [ -n "${ORIGIN_PID:-}" ] && kill "$ORIGIN_PID" 2>/dev/null
  stop_public_hosts "$NS" "$VETH_HOST"
}

# Run as a script, for tests that are not suites (the documented commands'
# test): `agent_origin.sh up DIR BASE_IMAGE [PID]` starts the origin with DIR
# as its WORK, publishes the image copy that trusts it, and prints
# "IMAGE RESOLVE_FILE"; the server stays up after it returns. Its names carry
# PID, the test's (default: the caller's).
# `agent_origin.sh down DIR` removes all of it. Exit 77 when this host cannot
# run it (not root, no network namespaces, no python3 or openssl).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  . "$(dirname "$0")/lib.sh"
  WORK=${2:?usage: agent_origin.sh up DIR BASE_IMAGE [PID] | down DIR}
  case $1 in
    up)
      [ "$(id -u)" = 0 ] && command -v python3 >/dev/null && command -v openssl >/dev/null || exit 77
      ip netns list >/dev/null 2>&1 || exit 77
      TAG=${4:-$PPID}  # the test's pid: a namespace whose test is gone is a leftover
      test_namespace agdoc 223
      mkdir -p "$WORK"
      printf 'TAG=%s\nNS=%s\nVETH_HOST=%s\n' "$TAG" "$NS" "$VETH_HOST" >"$WORK/origin.env"
      remove_leftover_namespaces agdocn agdoc >/dev/null
      exec 3>&1 >"$WORK/origin.log" 2>&1
      agent_origin_start || exit 1
      echo "ORIGIN_PID=$ORIGIN_PID" >>"$WORK/origin.env"
      agent_origin_image "${3:?the base image}" "itest-agdoc-$TAG" || exit 1
      echo "itest-agdoc-$TAG $WORK/hosts" >&3
      ;;
    down)
      # shellcheck disable=SC1091
      [ -f "$WORK/origin.env" ] && . "$WORK/origin.env"
      [ -n "${TAG:-}" ] || exit 0
      agent_origin_stop
      incus image delete "itest-agdoc-$TAG" >/dev/null 2>&1
      rm -rf "$WORK"
      ;;
    *) echo "usage: agent_origin.sh up DIR BASE_IMAGE [PID] | down DIR" >&2; exit 2 ;;
  esac
fi
