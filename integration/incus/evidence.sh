#!/usr/bin/env bash
# The evidence suite: "verified" means what it says. Against the real Incus
# daemon (containers), replays what root inside a sandbox, a firewall reload
# or a plain `incus start` does to a confined sandbox, and checks that status
# and start tell the truth about it:
#   - the probes are agentctl's own, made from the host in the sandbox's
#     network namespace: a guest whose /bin/sh prints seven "held" lines
#     changes nothing;
#   - status says "verified" only while the ACL is attached, agentctl's nft
#     table is as verified, and the proxy and resolver run; start puts each
#     back (the ACL re-attached, port 53 on host addresses closed again);
#   - status asks for the instance's state only when /proc does not show the
#     verified init still running (a recorded init that is not the container's
#     is reported as a start without agentctl);
#   - on this machine status reads the chain Incus made of the bridge's ACL
#     from the kernel, and asks Incus for the bridge only when they are not
#     as verified (an ACL rule added behind agentctl's back is reported);
#   - status asks for the ACL only when the bridge does not list it: Incus
#     refuses to delete or rename a listed ACL, or to list a missing one; a
#     detached and deleted ACL is reported as missing, and start makes it again;
#   - a stopped sandbox is never "verified" now, only "last verified";
#   - only agentctl starts a sandbox container: `incus start` is refused (a
#     writable mount swapped for a symlink while stopped never gets mounted);
#   - network.dns.disabled closes the resolver to that sandbox; the resolver
#     gives no CHAOS identity answers and never forwards a wildcard's apex;
#   - status --output json has typed egressProxy, resolver and confinement.
# Every test destination is on this machine (bridges the suite creates, and a
# network namespace routed only to itself). Everything made here is removed on exit.
#
# Usage: evidence.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
A=itest-ev-a-$TAG
B=itest-ev-b-$TAG
OWNER=1000 # the host user who owns the writable mount
test_namespace agev 236
PUB=$NET.2                    # the lib's servers
UPSTREAM=$NET.9               # a DNS server that logs every name it is asked
chmod 755 "$WORK"
export XDG_RUNTIME_DIR=$WORK/run
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

require_incus "network namespaces, nftables, the sandboxes' network namespaces, the Incus admin socket"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test servers"
command -v nft >/dev/null 2>&1 || skip "nft is needed (scripts/incus/up.sh installs nftables)"
for f in /etc/subuid /etc/subgid; do
  [ ! -e $f ] || grep -q "^root:$OWNER:" $f ||
    skip "$f does not let root map uid $OWNER (scripts/incus/up.sh adds root:$OWNER:1)"
done

UPSTREAM_PID=
cleanup() {
  set +e
  [ -n "$UPSTREAM_PID" ] && kill "$UPSTREAM_PID" 2>/dev/null
  for n in "$A" "$B"; do "$AGENTCTL" --provider incus delete --force "$n" >/dev/null 2>&1; done
  stop_public_hosts "$NS" "$VETH_HOST"
  rm -rf "$WORK"
}
trap cleanup EXIT

config_set incus.subnetPool=10.236.0.0/16

# ---------------------------------------------------------------- an upstream DNS server that logs
remove_leftover_namespaces agevn agev
start_public_hosts "$NS" "$VETH_HOST" "$VETH_NS" "$NET" "$PUB" || exit 1
ip -n "$NS" addr add "$UPSTREAM/24" dev "$VETH_NS"
ip route get "$UPSTREAM" | grep -q "dev $VETH_HOST" || { echo "refusing to run: $UPSTREAM is not routed to the test namespace"; exit 1; }
ip netns exec "$NS" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 53))
log = open(sys.argv[2], "a", buffering=1)
while True:
    data, peer = s.recvfrom(512)
    labels, i = [], 12
    while i < len(data) and data[i]:
        labels.append(data[i + 1:i + 1 + data[i]].decode(errors="replace")); i += 1 + data[i]
    log.write(".".join(labels) + "\n")
    s.sendto(data[:2] + b"\x81\x80" + data[4:], peer)
' "$UPSTREAM" "$WORK/upstream.log" &
UPSTREAM_PID=$!
mkdir -p "$XDG_CONFIG_HOME/agentctl/profiles"
printf 'apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network:\n    dns:\n      servers: [%s]\n' "$UPSTREAM" \
  >"$XDG_CONFIG_HOME/agentctl/profiles/evdns.yaml"
printf 'apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network:\n    dns:\n      disabled: true\n' \
  >"$XDG_CONFIG_HOME/agentctl/profiles/evnodns.yaml"

# ---------------------------------------------------------------- create
mkdir -p "$WORK/proj" "$HOME/.ssh"
echo "secret key" >"$HOME/.ssh/id_test"
chown "$OWNER:$OWNER" "$WORK/proj"
agentctl create "$A" --image "$IMAGE" --isolation container --profile evdns --mount-only --mount "$WORK/proj:/proj:w" \
  --allow "*.wild.test:443" --allow 9.9.9.9:80,443 >"$WORK/create-a.out" 2>&1 ||
  { cat "$WORK/create-a.out"; bad "create $A"; finish; exit 1; }
ok "create $A"
check "the probes run from the host, in the sandbox's network namespace" \
  grep -Eq "probe battery \(from the host, in the sandbox's network namespace\): 7/7 held in [0-9]+ ms" "$WORK/create-a.out"
grep -Eo "probe battery \(from the host[^:]*: 7/7 held in [0-9]+ ms" "$WORK/create-a.out" | sed 's/^/# /'
BR_A=$(agentctl status "$A" -o json | json_field 'd["extra"]["bridge"]')
GW_A=$(incus network get "$BR_A" ipv4.address --project default | cut -d/ -f1)
TABLE_A="agentctl-$BR_A"

# ---------------------------------------------------------------- status -o json: typed objects
agentctl status "$A" -o json >"$WORK/status-a.json"
check "status -o json: confinement, egressProxy and resolver are typed objects" python3 - "$WORK/status-a.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c, p, r = d["confinement"], d["egressProxy"], d["resolver"]
assert c["verified"] is True and c["state"] == "verified" and c["text"].startswith("verified (7/7 probes, ")
assert c["source"] == "host" and isinstance(c["checkedAt"], str) and c["checkedAt"].endswith("Z")
assert c["missing"] == []
assert len(c["probes"]) == 7
for probe in c["probes"]:
    assert isinstance(probe["name"], str) and probe["held"] is True and isinstance(probe["detail"], str)
for proc in (p, r):
    assert proc["running"] is True and isinstance(proc["pid"], int) and proc["pid"] > 0
    assert isinstance(proc["listen"], str) and isinstance(proc["user"], str) and proc["where"] == "host"
assert p["listen"].endswith(":3128") and r["listen"].endswith(":53")
PY

# ---------------------------------------------------------------- the ACL: status asks for it only when the bridge does not list it
# status takes an ACL its bridge lists as existing, since Incus keeps it: a
# network's security.acls may name only an ACL that exists, and Incus refuses
# to delete or rename one a network lists.
agentctl -v status "$A" >"$WORK/status-v" 2>&1
check "status of a verified sandbox is verified" grep -Eq '^Confinement: +verified \(7/7 probes' "$WORK/status-v"
check "  and asks Incus for neither its bridge nor its ACL: the kernel has the ACL's chain as verified" bash -c \
  "grep -q 'nf_tables: chain inet incus acl.$BR_A -> nl:' '$WORK/status-v' &&
   ! grep -q 'incus GET /1.0/networks/' '$WORK/status-v' && ! grep -q 'network-acls' '$WORK/status-v'"
check "  nor for the instance's state: /proc shows the verified init still running" bash -c \
  "grep -Eq 'incus GET /1.0/instances/$A(\?project=[^ &]*)? -> 200' '$WORK/status-v' &&
   ! grep -q 'instances/$A/state' '$WORK/status-v'"
IP_A=$(incus config device get "$A" eth0 ipv4.address)
check "  and shows its fixed address ($IP_A)" grep -Eq "^IPs: +${IP_A//./\\.}\$" "$WORK/status-v"
# A recorded init that is not this container's (pid 1 is the host's): status
# asks Incus, finds another init, and says the sandbox was started without agentctl.
VERIFIED_PID=$(incus config get "$A" user.agentctl.confinement.pid)
incus config set "$A" user.agentctl.confinement.pid=1
agentctl -v status "$A" >"$WORK/status-pid" 2>&1
incus config set "$A" user.agentctl.confinement.pid="$VERIFIED_PID"
check "a recorded init that is not the container's: status asks for the state" \
  grep -q "incus GET /1.0/instances/$A/state" "$WORK/status-pid"
check "  and is not verified: started again without agentctl" \
  grep -Eq '^Confinement: +not verified: the sandbox was started again without agentctl' "$WORK/status-pid"
check "with the verified init recorded again it is verified" bash -c \
  "agentctl status '$A' | grep -Eq '^Confinement: +verified \(7/7 probes'"
# The ACL's rules changed behind agentctl's back: Incus rewrites its chain,
# status asks Incus, finds the ACL attached, and says its rules are not the
# verified ones; start puts the ACL's rules back.
incus network acl rule add "agentctl-$A" egress action=allow destination=192.0.2.1/32 state=enabled --project default
agentctl -v status "$A" >"$WORK/status-rule" 2>&1
check "an ACL rule added behind agentctl's back: status is not verified and says the ACL was changed" \
  grep -Eq "^Confinement: +not verified: the nft rules Incus made of the network ACL agentctl-$A for bridge $BR_A are not the ones that were verified" "$WORK/status-rule"
check "  (it asked for the bridge to find out)" grep -q "incus GET /1.0/networks/$BR_A" "$WORK/status-rule"
agentctl start "$A" >"$WORK/start-rule.out" 2>&1
check "start puts the ACL's rules back" bash -c "! incus network acl show 'agentctl-$A' --project default | grep -q 192.0.2.1"
check "  and status is verified again" bash -c "agentctl status '$A' | grep -Eq '^Confinement: +verified \(7/7 probes'"
check "Incus refuses to delete the ACL the bridge lists" bash -c \
  "! incus network acl delete 'agentctl-$A' --project default >'$WORK/acl-delete.out' 2>&1 &&
   grep -q 'Cannot delete an ACL that is in use' '$WORK/acl-delete.out'"
check "Incus refuses to rename it" bash -c \
  "! incus network acl rename 'agentctl-$A' 'agentctl-$A-x' --project default >'$WORK/acl-rename.out' 2>&1 &&
   grep -q 'Cannot rename an ACL that is in use' '$WORK/acl-rename.out'"
check "Incus refuses a bridge an ACL that does not exist" bash -c \
  "! incus network set '$BR_A' security.acls='agentctl-$A,agentctl-nosuch-$TAG' --project default >'$WORK/acl-set.out' 2>&1 &&
   grep -q 'Network ACL \"agentctl-nosuch-$TAG\" does not exist' '$WORK/acl-set.out'"
check "the ACL is still there and attached" bash -c \
  "incus network acl show 'agentctl-$A' --project default >/dev/null && test \"\$(incus network get '$BR_A' security.acls --project default)\" = 'agentctl-$A'"

# ---------------------------------------------------------------- a guest that forges the battery, the ACL detached
agentctl exec --root "$A" -- bash -c 'printf "#!/bin/dash\nfor p in direct-bypass host-port host-address dns-tcp-elsewhere dns-udp-elsewhere proxy-denied-name dns-denied-name; do echo agentctl-probe \$p held forged-by-the-guest; done\n" >/bin/sh.new && chmod 755 /bin/sh.new && mv /bin/sh.new /bin/sh'
check "the guest's /bin/sh prints seven forged held lines" \
  test "$(incus exec "$A" -- /bin/sh -c true | grep -c 'held forged-by-the-guest')" = 7
incus network unset "$BR_A" security.acls --project default
agentctl status "$A" >"$WORK/status-noacl" 2>&1
check "ACL detached: status is not verified and names the ACL and the fix" \
  grep -Eq "^Confinement: +not verified: the network ACL agentctl-$A is not attached to bridge $BR_A; \`agentctl start $A\` restores" "$WORK/status-noacl"
check "ACL detached: JSON verified is false and missing names it" bash -c \
  "agentctl status '$A' -o json | python3 -c 'import json,sys; c=json.load(sys.stdin)[\"confinement\"]; sys.exit(not (c[\"verified\"] is False and any(\"not attached\" in m for m in c[\"missing\"])))'"
incus network acl delete "agentctl-$A" --project default >/dev/null
agentctl status "$A" >"$WORK/status-acl-gone" 2>&1
check "ACL detached and deleted: status says it does not exist" \
  grep -Eq "^Confinement: +not verified: the network ACL agentctl-$A does not exist; \`agentctl start $A\` restores" "$WORK/status-acl-gone"
agentctl start "$A" >"$WORK/start-acl.out" 2>&1
check "start makes the deleted ACL again and says so" \
  grep -q "creating network ACL agentctl-$A again (it was missing)" "$WORK/start-acl.out"
check "start re-attaches the detached ACL and says so" \
  grep -q "attaching network ACL agentctl-$A to bridge $BR_A again (it was detached)" "$WORK/start-acl.out"
check "the ACL is attached again" test "$(incus network get "$BR_A" security.acls --project default)" = "agentctl-$A"
check "start's probes are agentctl's: no line of the guest's forgery is recorded" bash -c \
  "incus config get '$A' user.agentctl.confinement.probes | grep -q 'Connection refused' && ! incus config get '$A' user.agentctl.confinement.probes | grep -q forged"
check "status is verified again" grep -q "network confinement verified (7/7 probes" "$WORK/start-acl.out"

# ---------------------------------------------------------------- agentctl's nft table lost (a firewall reload)
agentctl create "$B" --image "$IMAGE" --isolation container --profile evnodns --mount-none >"$WORK/create-b.out" 2>&1 ||
  { cat "$WORK/create-b.out"; bad "create $B"; }
BR_B=$(agentctl status "$B" -o json | json_field 'd["extra"]["bridge"]')
# A's IP literal with two ports is an inline set in both A's tables, which
# the kernel names by the first number free in the table.
check "A's allowed ports 80 and 443 are inline sets in agentctl's table and in Incus's chain" bash -c \
  "nft list table inet '$TABLE_A' | grep -q '9.9.9.9 tcp dport { 80, 443 }' &&
   nft list chain inet incus 'acl.$BR_A' | grep -q '9.9.9.9 tcp dport { 80, 443 }'"
check "A is still verified after B's bridge and ACL were made (Incus's table changed around A's chain)" bash -c \
  "agentctl status '$A' | grep -Eq '^Confinement: +verified \\(7/7 probes'"
GW_B=$(incus network get "$BR_B" ipv4.address --project default | cut -d/ -f1)
tcp_from_a() { agentctl exec "$A" -- bash -c "timeout 3 bash -c 'exec 3<>/dev/tcp/$1/$2' 2>/dev/null && echo connected || echo refused"; }
check "with its table, A cannot reach port 53 of another host address ($GW_B)" test "$(tcp_from_a "$GW_B" 53)" = refused
nft delete table inet "$TABLE_A"
check "without its table, port 53 on host addresses is open to A again (the hole)" test "$(tcp_from_a "$GW_B" 53)" = connected
agentctl status "$A" >"$WORK/status-nonft" 2>&1
check "nft table deleted: status is not verified and names the table" \
  grep -Eq "^Confinement: +not verified: agentctl's nft table inet $TABLE_A does not exist; \`agentctl start $A\`" "$WORK/status-nonft"
agentctl start "$A" >"$WORK/start-nft.out" 2>&1
check "start puts the table back" bash -c "nft list table inet $TABLE_A >/dev/null"
check "port 53 on host addresses is closed to A again" test "$(tcp_from_a "$GW_B" 53)" = refused
check "and status is verified again" bash -c "agentctl status '$A' | grep -Eq '^Confinement: +verified \\(7/7 probes'"
nft flush chain inet "$TABLE_A" from_sandbox
check "a table whose rules were flushed is not the one verified" bash -c \
  "agentctl status '$A' | grep -q \"nft table inet $TABLE_A is not the one that was verified\""
agentctl start "$A" >/dev/null 2>&1
check "what start recorded of the table is the kernel's digest" bash -c \
  "incus config get '$A' user.agentctl.confinement.firewall | grep -Eq '^nl:[0-9a-f]{16}\$'"
# The same hole without removing a rule: a dormant table enforces nothing.
nft add table inet "$TABLE_A" '{ flags dormant; }'
check "a dormant table leaves port 53 on host addresses open to A" test "$(tcp_from_a "$GW_B" 53)" = connected
check "a table made dormant is not the one verified" bash -c \
  "agentctl status '$A' | grep -q \"nft table inet $TABLE_A is not the one that was verified\""
agentctl start "$A" >/dev/null 2>&1
check "start makes it enforce again" test "$(tcp_from_a "$GW_B" 53)" = refused
# A sandbox verified by an earlier agentctl recorded a digest (FNV-1a 64) of
# nft's listing of the table: status still reads it so until the next start.
nft_text_digest() {
  nft list table inet "$TABLE_A" | python3 -c '
import sys
h = 0xcbf29ce484222325
for b in sys.stdin.buffer.read():
    h = ((h ^ b) * 0x100000001b3) % (1 << 64)
print(f"{h:016x}")'
}
incus config set "$A" user.agentctl.confinement.firewall="$(nft_text_digest)"
check "a record of nft's listing (an earlier agentctl's) is still verified" bash -c \
  "agentctl status '$A' | grep -Eq '^Confinement: +verified \\(7/7 probes'"
nft flush chain inet "$TABLE_A" from_sandbox
check "  and a change of the table is still seen" bash -c \
  "agentctl status '$A' | grep -q \"nft table inet $TABLE_A is not the one that was verified\""
agentctl start "$A" >/dev/null 2>&1

# ---------------------------------------------------------------- the proxy gone
PROXY_PID=$(agentctl status "$A" -o json | json_field 'd["egressProxy"]["pid"]')
kill "$PROXY_PID" && wait_until 10 bash -c "! kill -0 $PROXY_PID"
check "proxy killed: status is not verified and says the proxy is not running" bash -c \
  "agentctl status '$A' | grep -Eq '^Confinement: +not verified: the egress proxy is not running'"
check "proxy killed: JSON egressProxy.running is false" bash -c \
  "agentctl status '$A' -o json | python3 -c 'import json,sys; p=json.load(sys.stdin)[\"egressProxy\"]; sys.exit(not (p[\"running\"] is False and p[\"pid\"] is None))'"
agentctl start "$A" >/dev/null 2>&1
check "start brings it back, verified" bash -c "agentctl status '$A' | grep -Eq '^Confinement: +verified'"

# ---------------------------------------------------------------- network.dns.disabled closes the resolver
check "dns.disabled: the probe finds the resolver closed" bash -c \
  "incus config get '$B' user.agentctl.confinement.probes | grep -q 'was refused (network.dns.disabled)'"
dns_query_py='
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x4747, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in sys.argv[2].split(".")) + b"\0" + struct.pack(">HH", int(sys.argv[3]), int(sys.argv[4]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
try:
    s.connect((sys.argv[1], 53)); s.send(q); r = s.recv(512)
    print("answer rcode=%d answers=%d" % (r[3] & 15, struct.unpack(">H", r[6:8])[0]))
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
'
check "dns.disabled: a UDP query to B's resolver is refused" \
  test "$(agentctl exec "$B" -- python3 -c "$dns_query_py" "$GW_B" example.test 1 1)" = refused
check "dns.disabled: TCP to B's resolver is refused" bash -c \
  "agentctl exec '$B' -- bash -c 'timeout 3 bash -c \"exec 3<>/dev/tcp/$GW_B/53\"' 2>/dev/null; [ \$? = 1 ]"
check "dns.disabled: status says the resolver is closed to the sandbox" bash -c \
  "agentctl status '$B' | grep -q 'closed to the sandbox: network.dns.disabled'"

# ---------------------------------------------------------------- the resolver: no CHAOS identity, no apex
for name in version.bind servers.bind hostname.bind id.server; do
  answer=$(agentctl exec "$A" -- python3 -c "$dns_query_py" "$GW_A" "$name" 16 3)
  check "CHAOS TXT $name gets no answer ($answer)" bash -c "[[ '$answer' != *answers=[1-9]* ]]"
done
agentctl exec "$A" -- python3 -c "$dns_query_py" "$GW_A" api.wild.test 1 1 >/dev/null
wait_until 10 grep -qx api.wild.test "$WORK/upstream.log"
check "a subdomain of *.wild.test is forwarded upstream" grep -qx api.wild.test "$WORK/upstream.log"
answer=$(agentctl exec "$A" -- python3 -c "$dns_query_py" "$GW_A" wild.test 1 1)
agentctl exec "$A" -- python3 -c "$dns_query_py" "$GW_A" api2.wild.test 1 1 >/dev/null
wait_until 10 grep -qx api2.wild.test "$WORK/upstream.log"
check "the apex wild.test is not forwarded upstream ($answer)" bash -c "! grep -qx wild.test '$WORK/upstream.log'"

# ---------------------------------------------------------------- stopped, then started without agentctl
agentctl stop "$A" >/dev/null 2>&1
agentctl status "$A" >"$WORK/status-stopped" 2>&1
check "stopped: status is not verified now, and says when it was last verified" \
  grep -Eq "^Confinement: +not verified: the sandbox is not running \(last verified: 7/7 probes, [0-9T:-]+Z\)" "$WORK/status-stopped"
# While it is stopped, its writable mount is swapped for a symlink to ~/.ssh.
rmdir "$WORK/proj" && ln -s "$HOME/.ssh" "$WORK/proj"
incus start "$A" >"$WORK/incus-start.out" 2>&1; rc=$?
check "a plain incus start is refused (rc $rc)" test "$rc" != 0
check "... and the sandbox stays stopped" test "$(incus list "$A" -c s -f csv)" = STOPPED
agentctl start "$A" >"$WORK/start-swapped.out" 2>&1; rc=$?
check "agentctl start refuses the swapped mount" \
  bash -c "[ $rc != 0 ] && grep -q '$WORK/proj now resolves to $HOME/.ssh' '$WORK/start-swapped.out'"
check "the credentials were never exposed" test "$(cat "$HOME/.ssh/id_test")" = "secret key"
rm "$WORK/proj" && mkdir "$WORK/proj" && chown "$OWNER:$OWNER" "$WORK/proj"
incus start "$A" >/dev/null 2>&1; rc=$?
check "with the directory back, incus start is still refused: only agentctl starts it (rc $rc)" \
  bash -c "[ $rc != 0 ] && [ \"\$(incus list '$A' -c s -f csv)\" = STOPPED ]"
agentctl start "$A" >"$WORK/start-back.out" 2>&1
check "agentctl start starts it, verified" grep -q "network confinement verified (7/7 probes" "$WORK/start-back.out"
check "the start pass was used up" test -z "$(ls -A "$XDG_RUNTIME_DIR/agentctl/start-pass" 2>/dev/null)"
incus restart "$A" >/dev/null 2>&1
check "incus restart leaves it stopped, not running unchecked" test "$(incus list "$A" -c s -f csv)" = STOPPED

finish
