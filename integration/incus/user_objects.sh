#!/usr/bin/env bash
# user_objects.sh before|after RECORDS AGENTCTL
#
# Proves that a test run leaves what the user has exactly as it was.
#
#   before  makes, as a user would, a sandbox and an image alias in the default
#           project (when the daemon is up and has an image there), then writes
#           down everything the user has: the daemon's configuration, projects,
#           and in every project but the tests' the instances, images, profiles;
#           managed networks, network ACLs, storage pools, nft tables, and
#           root's agentctl and incus files (with their contents' hashes).
#   after   writes the same record again, compares the two (the difference is
#           printed, and fails the run), then removes the sandbox and alias
#           `before` made. Also run after a killed run: what that run's `before`
#           made is found in RECORDS and removed.
#
# RECORDS is a directory that survives the run (scripts/test.sh keeps it next
# to its other records). Run as root, after the tests' own teardown (down.sh).
set -euo pipefail
mode=$1 RECORDS=$2 AGENTCTL=$3
TESTS_PROJECT=${AGENTCTL_INCUS_PROJECT:-agentctl-tests}
CANARY_HOME=$RECORDS/canary-home
mkdir -p "$RECORDS"
# The tests' own variables never reach what this script looks at.
unset INCUS_PROJECT AGENTCTL_CONFIG XDG_CONFIG_HOME XDG_STATE_HOME XDG_RUNTIME_DIR

daemon_up() { command -v incus >/dev/null 2>&1 && incus admin waitready --timeout=2 >/dev/null 2>&1; }
canary() { HOME=$CANARY_HOME "$AGENTCTL" --provider incus "$@"; }

# The record: one JSON document, keys sorted, volatile instance keys left out
# (Incus updates them itself), so two records of the same state are equal.
record() {
  {
    if daemon_up; then
      echo "daemon: up"
      TESTS_PROJECT=$TESTS_PROJECT python3 - <<'PY'
import json, os, subprocess
def q(path):
    return json.loads(subprocess.run(["incus", "query", path], check=True, capture_output=True, text=True).stdout)
tests = os.environ["TESTS_PROJECT"]
out = {"server": q("/1.0").get("config", {}), "projects": {}, "networks": {}, "acls": {}, "pools": []}
for p in q("/1.0/projects?recursion=1"):
    if p["name"] == tests:
        continue
    name = p["name"]
    inst = {}
    for i in q(f"/1.0/instances?recursion=1&project={name}"):
        inst[i["name"]] = {"status": i["status"], "profiles": i["profiles"], "devices": i["devices"],
                           "config": {k: v for k, v in i["config"].items() if not k.startswith("volatile.")}}
    images = sorted((im["fingerprint"], sorted(a["name"] for a in im.get("aliases", [])))
                    for im in q(f"/1.0/images?recursion=1&project={name}"))
    profiles = {pr["name"]: {"config": pr["config"], "devices": pr["devices"]}
                for pr in q(f"/1.0/profiles?recursion=1&project={name}")}
    out["projects"][name] = {"config": p["config"], "instances": inst, "images": images, "profiles": profiles}
for n in q("/1.0/networks?recursion=1"):
    if n.get("managed"):
        out["networks"][n["name"]] = n["config"]
for a in q("/1.0/network-acls?recursion=1"):
    out["acls"][a["name"]] = {"config": a["config"], "egress": a["egress"], "ingress": a["ingress"]}
out["pools"] = sorted(s["name"] for s in q("/1.0/storage-pools?recursion=1"))
print(json.dumps(out, indent=1, sort_keys=True))
PY
    else
      echo "daemon: not running"
    fi
    echo "agentctl's host processes:"
    pgrep -af -- "egress-proxy --listen|dnsmasq .*--interface=agc-" | sort || true
    echo "nft tables:"
    nft list tables 2>/dev/null | sort || true
    echo "files:"
    # Root's own agentctl and incus files. Leases (rewritten on every DHCP
    # renewal) and the logs of the user's running sandboxes change as they
    # run, so only their names count.
    for dir in /root/.config/agentctl /root/.local/state/agentctl /root/.config/incus; do
      [ -d "$dir" ] || continue
      find "$dir" -type f ! -name '*.lock' | sort | while read -r f; do
        case "$f" in
          *.leases | *.log | *.out) echo "$f" ;;
          *) echo "$f $(sha256sum <"$f" | cut -c1-16)" ;;
        esac
      done
      find "$dir" -name '*.pid' -type f | sort | while read -r f; do
        if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$f alive"; else echo "$f gone"; fi
      done
    done
  } >"$1"
}

# What a `before` made (this run's, or a killed run's).
remove_canaries() {
  if [ -s "$RECORDS/canary-sandbox" ] && daemon_up; then
    canary delete --force "$(cat "$RECORDS/canary-sandbox")" >/dev/null 2>&1 || true
  fi
  if [ -s "$RECORDS/canary-image" ] && daemon_up; then
    incus image alias delete "$(cat "$RECORDS/canary-image")" >/dev/null 2>&1 || true
  fi
  rm -rf "$RECORDS/canary-sandbox" "$RECORDS/canary-image" "$CANARY_HOME"
}

case $mode in
  before)
    remove_canaries
    if daemon_up; then
      # The image the user's own sandboxes start from (setup.sh's), if there is one.
      image=$(incus image alias list -f csv | cut -d, -f1 | grep -x "${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}" || true)
      if [ -n "$image" ]; then
        name=owner-canary-$$
        incus image alias create "$name" "$(incus image alias list -f csv | awk -F, -v a="$image" '$1==a{print $2}')"
        echo "$name" >"$RECORDS/canary-image"
        mkdir -p "$CANARY_HOME"
        echo "$name" >"$RECORDS/canary-sandbox"
        canary create "$name" --isolation container --mount-none --image "$name" --allow example.test:443 >/dev/null 2>&1 ||
          { echo "user_objects.sh: could not make the user's sandbox $name" >&2; exit 1; }
        echo "user_objects.sh: made a user's sandbox and image alias ($name) in the default project"
      else
        echo "user_objects.sh: no image in the default project: no user's sandbox made (the record is still compared)"
      fi
    fi
    record "$RECORDS/before"
    echo "user_objects.sh: recorded what the user has ($(wc -l <"$RECORDS/before") lines)"
    ;;
  after)
    [ -s "$RECORDS/before" ] || { echo "user_objects.sh: no record from before the run" >&2; remove_canaries; exit 1; }
    record "$RECORDS/after"
    status=0
    if ! diff -u "$RECORDS/before" "$RECORDS/after"; then
      echo "user_objects.sh: the test run changed what the user has (above: - before, + after)" >&2
      status=1
    else
      echo "user_objects.sh: everything the user had is exactly as it was"
    fi
    if [ -s "$RECORDS/canary-sandbox" ]; then
      out=$(canary exec "$(cat "$RECORDS/canary-sandbox")" -- echo still-here 2>&1) ||
        { echo "user_objects.sh: the user's sandbox no longer runs commands: $out" >&2; status=1; }
    fi
    remove_canaries
    rm -f "$RECORDS/before" "$RECORDS/after"
    exit $status
    ;;
  *)
    echo "usage: user_objects.sh before|after RECORDS AGENTCTL" >&2
    exit 2
    ;;
esac
