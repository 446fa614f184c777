#!/usr/bin/env bash
# scripts/incus/down.sh removes only what up.sh and the test suites made. Run in
# its dry-run mode against the real daemon (it only reads) with ownership
# records in a scratch directory: without records it must leave the daemon and
# everything that is not a test sandbox alone; with a record that up.sh started
# the daemon it stops exactly the recorded pid, and only when no foreign
# instance is in it (else it drops the record); it wipes state only when up.sh
# also initialised the daemon and no foreign instance is left.
#
# Usage: down_script.sh REPO_ROOT     (exit 77 = skipped, with the reason printed)
set -uo pipefail
ROOT=${1:?usage: down_script.sh REPO_ROOT}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (down.sh refuses otherwise)"
command -v incus >/dev/null 2>&1 || skip "the incus client is not installed"
incus admin waitready --timeout=3 >/dev/null 2>&1 || skip "no Incus daemon is reachable"

PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL - $*"; }
WORK=$(mktemp -d /tmp/agentctl-down-test.XXXXXX)
sleep 300 &
STANDIN=$!
trap 'kill $STANDIN 2>/dev/null; rm -rf "$WORK"' EXIT
down() { AGENTCTL_DOWN_DRY_RUN=1 AGENTCTL_INCUS_OWNED="$WORK/owned" AGENTCTL_INCUS_RUN="$WORK/run" \
  bash "$ROOT/scripts/incus/down.sh" 2>&1; }
mkdir -p "$WORK/owned" "$WORK/run"
before=$(incus list -f csv -c n | sort; incus image list -f csv -c f | sort; incus network list -f csv | sort)

# 1. nothing recorded: only test sandboxes may be named, the daemon stays.
out=$(down)
echo "$out" | sed 's/^/    /'
foreign=$(echo "$out" | grep 'would run' | grep -Ev 'would run: (incus (delete --force|network delete|network acl delete) (itest-|doctest-|agc-|agentctl-(itest|doctest)-)|nft delete table inet agentctl-agc-|kill [0-9]+)')
[ -z "$foreign" ] && ok "no records: nothing but test sandboxes would be removed" || bad "no records: would touch $foreign"
stray=
for pid in $(echo "$out" | sed -n 's/.*would run: kill \([0-9]*\)$/\1/p'); do
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -Eq 'dnsmasq .*--interface=agc-|egress-proxy --listen ' || stray="$stray $pid"
done
[ -z "$stray" ] && ok "no records: the only processes stopped serve test sandboxes' bridges" || bad "would stop$stray"
echo "$out" | grep -q 'not started by up.sh: left running' && ok "no records: the daemon is left running" || bad "no records: daemon not left alone"
echo "$out" | grep -Eq 'rm -rf|stop incusd|nft delete table (inet|bridge) incus|losetup' && bad "no records: destructive step planned" || ok "no records: no stop, no wipe"

# Foreign: an instance of any project but the default's test sandboxes.
foreign_present() { incus list --all-projects -f csv -c e,n | grep -Eqv '^default,(itest-|doctest-)'; }

# 2. up.sh started the daemon (the recorded pid is a stand-in) but did not
# initialise it: stopped only when it holds nothing but test sandboxes; else
# someone uses it, and it is left running and no longer recorded as up.sh's.
echo "$STANDIN" >"$WORK/run/incusd.pid"
: >"$WORK/owned/started-incusd"
out=$(down)
if foreign_present; then
  echo "$out" | grep -q 'would stop incusd' && bad "started, foreign instance present: would stop it: $out" ||
    ok "started by up.sh, foreign instance present: left running"
  echo "$out" | grep -q "would run: rm -f $WORK/owned/started-incusd $WORK/run/incusd.pid" &&
    ok "started by up.sh, foreign instance present: no longer recorded as up.sh's" || bad "record kept: $out"
else
  echo "$out" | grep -q "would stop incusd (pid $STANDIN)" && ok "started by up.sh: stops exactly the recorded pid" || bad "started: $out"
fi
echo "$out" | grep -q 'rm -rf' && bad "started, not initialised: would wipe state" || ok "started, not initialised: state kept"

# 3. started and initialised: wipe only when no foreign instance is left.
: >"$WORK/owned/initialised"
out=$(down)
if foreign_present; then
  echo "$out" | grep -q 'not test sandboxes' && ok "initialised, foreign instance present: left running" || bad "initialised: $out"
  echo "$out" | grep -q 'rm -rf' && bad "initialised with a foreign instance: would wipe" || ok "initialised with a foreign instance: no wipe"
else
  echo "$out" | grep -q 'would run: rm -rf /var/lib/incus' && ok "initialised, nothing foreign: state would be removed" || bad "initialised: $out"
fi

# 4. the HTTPS listener: unset only when it is still the address up.sh recorded.
rm -f "$WORK/owned/"*
current=$(incus config get core.https_address)
echo "${current:-127.0.0.1:1}" >"$WORK/owned/https-address"
out=$(down)
if [ -n "$current" ]; then
  echo "$out" | grep -q 'would run: incus config unset core.https_address' && ok "recorded HTTPS listener: unset" \
    || bad "recorded HTTPS listener not unset: $out"
else
  echo "$out" | grep -q 'core.https_address' && bad "no listener, yet down.sh would touch it: $out" \
    || ok "recorded HTTPS listener already gone: nothing to unset"
fi
echo "198.51.100.1:1" >"$WORK/owned/https-address"
out=$(down)
echo "$out" | grep -q 'core.https_address' && bad "a listener up.sh did not set would be unset: $out" \
  || ok "an HTTPS listener up.sh did not set is left alone"

after=$(incus list -f csv -c n | sort; incus image list -f csv -c f | sort; incus network list -f csv | sort)

# 5. a test sandbox's bridge left behind: it goes, and so does agentctl's host
# firewall table for it (a bridge and a table of this test's own, no instance).
BR=agc-dn$$
if incus network create "$BR" --type bridge ipv4.address=none ipv6.address=none \
  "user.agentctl.sandbox=itest-down-$$" >/dev/null && nft add table inet "agentctl-$BR"; then
  out=$(down)
  echo "$out" | grep -q "would run: incus network delete $BR" && ok "a test sandbox's bridge: deleted" \
    || bad "a test sandbox's bridge would be kept: $out"
  echo "$out" | grep -q "would run: nft delete table inet agentctl-$BR" && ok "and agentctl's firewall table for it" \
    || bad "agentctl's firewall table for a test bridge would be kept: $out"
else
  bad "could not make a test bridge and its table"
fi
nft delete table inet "agentctl-$BR" 2>/dev/null
incus network delete "$BR" >/dev/null 2>&1

# 6. a project of up.sh's own (scripts/test.sh's): the project goes with what is
# in it, and so do the bridges agentctl marked as that project's, whatever
# their sandbox's name; a bridge of the default project stays, test-like name
# or not.
P=agentctl-dn$$ MINE=agc-dp$$ USERS=agc-dq$$
rm -f "$WORK/owned/"*
if incus project create "$P" -c features.images=true -c features.profiles=true >/dev/null &&
  incus network create "$MINE" --type bridge ipv4.address=none ipv6.address=none \
    user.agentctl.sandbox=work "user.agentctl.project=$P" >/dev/null &&
  incus network create "$USERS" --type bridge ipv4.address=none ipv6.address=none \
    "user.agentctl.sandbox=itest-users-$$" >/dev/null; then
  echo "$P" >"$WORK/owned/project"
  out=$(AGENTCTL_INCUS_PROJECT=$P down)
  echo "$out" | grep -q "would run: incus network delete $MINE\$" && ok "the project's bridge: deleted" \
    || bad "a bridge marked with the project would be kept: $out"
  echo "$out" | grep -q "network delete $USERS" && bad "a default-project bridge would be deleted: $out" \
    || ok "a default project's bridge stays, even with a test-like sandbox name"
  echo "$out" | grep -q "would run: incus project delete $P\$" && ok "the project itself: deleted" \
    || bad "the project would be kept: $out"
  out=$(AGENTCTL_INCUS_PROJECT=agentctl-dn-other$$ down)
  echo "$out" | grep -q "project delete" && bad "a project other than the recorded one would be deleted: $out" \
    || ok "a project that is not the recorded one is left alone"
else
  bad "could not make a project and two bridges"
fi
incus network delete "$MINE" >/dev/null 2>&1
incus network delete "$USERS" >/dev/null 2>&1
incus project delete "$P" >/dev/null 2>&1
[ "$before" = "$after" ] && ok "a dry run changed nothing in Incus" || bad "a dry run changed Incus"
kill -0 "$STANDIN" && ok "the stand-in daemon pid was not signalled" || bad "the stand-in was killed"
echo "down.sh: $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
