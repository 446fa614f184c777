# Shared by the Incus integration suites (suite.sh, egress.sh, containment.sh):
# the checks every suite makes before it runs (exit 77 = skipped, with the
# reason), the ok/FAIL bookkeeping, and the agentctl wrapper.
# Source it after setting AGENTCTL and IMAGE.

skip() { echo "SKIP: $*"; exit 77; }

# require_incus WHY_ROOT: root, the incus client, a reachable daemon and the image.
require_incus() {
  [ "$(id -u)" = 0 ] || skip "needs root ($1)"
  command -v incus >/dev/null 2>&1 || skip "the incus client is not installed (scripts/incus/up.sh)"
  incus admin waitready --timeout=3 >/dev/null 2>&1 || skip "no Incus daemon is reachable (start one: scripts/incus/up.sh)"
  incus image alias list -f csv | cut -d, -f1 | grep -qx "$IMAGE" ||
    skip "image $IMAGE is missing (scripts/incus/up.sh builds it)"
}

PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
# Every agentctl the suites run: against the local daemon, or with
# AGENTCTL_REMOTE set (remote.sh) against that Incus remote over HTTPS: the
# same tests, the other transport. Exported, so `bash -c "agentctl ..."` works.
agentctl() { "$AGENTCTL" --provider incus ${AGENTCTL_REMOTE:+--remote "$AGENTCTL_REMOTE"} "$@"; }
export AGENTCTL AGENTCTL_REMOTE
export -f agentctl

# The last line of a suite: the tally, and its exit status.
finish() {
  echo "# $PASS passed, $FAIL failed"
  [ "$FAIL" = 0 ]
}
