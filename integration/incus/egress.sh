#!/usr/bin/env bash
# The Incus egress suite: every sandbox leaves only through its own egress
# proxy. Drives the built agentctl against the real Incus daemon (containers)
# and checks, from inside the sandboxes: hostname and wildcard allow rules over
# plain HTTP and CONNECT, 403s with the reason, direct connections refused at
# once, DNS only for allowlisted names, the host unreachable (also under
# --allow-lan), live policy add/remove, the proxy's lifecycle (fail closed,
# restored by start), logs --network, an upload budget set at create and a
# grant that ends on time (policy add --for), the guest's proxy settings and
# the confinement probe battery.
#
# Every test destination is on this machine: "public" servers in a network
# namespace the suite creates, routed only to that namespace (checked with
# `ip route get` before any traffic). Names resolve through the proxy's
# resolve file (setting incus.proxyResolveFile), never through outside DNS.
#
# Usage: egress.sh AGENTCTL_BINARY     (exit 77 = skipped, with the reason printed)
set -uo pipefail

. "$(dirname "$0")/lib.sh"
suite_start "$@"
A=itest-e10-a-$TAG
B=itest-e10-b-$TAG
test_namespace ag10 220
PUB=$NET.2        # allowed.test, api.wild.test
PUB_IP=$NET.3     # allowed by IP literal (a direct ACL rule), and other.test
PORT=8080         # HTTP on both
RAW_PORT=8081     # a line-echo TCP server (long-lived connections)
SSH_PORT=8022     # sends an SSH banner
require_incus "network namespaces, nftables, the Incus admin socket"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed for the test servers"
command -v nft >/dev/null 2>&1 || skip "nft is needed (scripts/incus/up.sh installs nftables)"

in_a() { agentctl exec "$A" -- "$@"; }

SERVER_PIDS=()
cleanup() {
  set +e
  for pid in "${SERVER_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for n in "$A" "$B"; do "$AGENTCTL" --provider incus delete --force "$n" >/dev/null 2>&1; done
  stop_public_hosts "$NS" "$VETH_HOST"
  rm -rf "$WORK"
}
trap cleanup EXIT

config_set incus.subnetPool=10.220.0.0/16
cat >"$WORK/hosts" <<EOF
$PUB allowed.test
$PUB api.wild.test
$PUB wild.test
$PUB_IP other.test
EOF
config_set "incus.proxyResolveFile=$WORK/hosts"

# ---------------------------------------------------------------- namespace with "public" test servers
remove_leftover_namespaces ag10n ag10
start_public_hosts "$NS" "$VETH_HOST" "$VETH_NS" "$NET" "$PUB" "$PUB_IP" || exit 1
SERVER_PIDS+=("$PUBLIC_PID")
check "test servers answer from the host" bash -c "curl -s http://$PUB:$PORT/ | grep -q hello && curl -s http://$PUB_IP:$PORT/ | grep -q hello"

# ---------------------------------------------------------------- create
# A user profile: the sandbox's resolver forwards allowlisted names to the test
# namespace's DNS server (it echoes each query back as an empty answer).
mkdir -p "$XDG_CONFIG_HOME/agentctl/profiles"
printf 'apiVersion: agentctl.dev/v1\nkind: Profile\nspec:\n  network:\n    dns:\n      servers: [%s]\n' "$PUB_IP" \
  >"$XDG_CONFIG_HOME/agentctl/profiles/e10dns.yaml"
t0=$(date +%s%N)
agentctl create "$A" --image "$IMAGE" --isolation container --mount-none --profile e10dns \
  --allow allowed.test:$PORT --allow "*.wild.test:$PORT" --allow allowed.test:$SSH_PORT \
  --allow "$PUB_IP:$RAW_PORT" --allow allowed.test:$RAW_PORT --budget allowed.test:$RAW_PORT=64KiB \
  >"$WORK/create-a.out" 2>&1
rc=$?
echo "# create $A took $(( ($(date +%s%N) - t0) / 1000000 )) ms"
if [ $rc -ne 0 ]; then cat "$WORK/create-a.out"; bad "create $A"; echo "# $PASS passed, $FAIL failed"; exit 1; fi
ok "create $A"
check "create verifies confinement with the whole probe battery" grep -q "network confinement verified (7/7 probes" "$WORK/create-a.out"
agentctl status "$A" >"$WORK/status-a" 2>&1
check "status: Confinement: verified (N/N probes, TIME)" grep -Eq "^Confinement: +verified \(7/7 probes, [0-9T:-]+Z\)" "$WORK/status-a"
check "status: the egress proxy runs, as the sandbox's own uid" grep -Eq "^Egress proxy: +10\.220\.[0-9.]+:3128 \(running, pid [0-9]+, as uid 20000[0-9]{5}\)" "$WORK/status-a"
check "status: the resolver answers allowlisted names only" grep -q "answers allowlisted names only" "$WORK/status-a"
check "status: the network line says so too" grep -Eq "^Network: +default deny; .*DNS for allowlisted names only" "$WORK/status-a"
check "status --output json: dns.allowlistedOnly" bash -c \
  "agentctl status '$A' --output json | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)[\"network\"][\"dns\"][\"allowlistedOnly\"] is not True)'"
PROBES=$(incus config get "$A" user.agentctl.confinement.probes)
for p in direct-bypass host-port host-address dns-tcp-elsewhere dns-udp-elsewhere proxy-denied-name dns-denied-name; do
  check "probe $p is recorded as held" \
    python3 -c "import json,sys; r={x['name']:x['verdict'] for x in json.loads(sys.argv[1])}; sys.exit(r.get('$p')!='held')" "$PROBES"
done
STATUS_JSON=$(agentctl status "$A" -o json)
BR=$(json_field 'd["extra"]["bridge"]' <<<"$STATUS_JSON")
GW=$(incus network get "$BR" ipv4.address | cut -d/ -f1)
PROXY_PID=$(json_field 'd["extra"]["Egress proxy"].split("pid ")[1].split(",")[0]' <<<"$STATUS_JSON")
HOST_UID=$(incus config get "$A" user.agentctl.host.uid)
check "the proxy process runs as the uid recorded on the sandbox" test "$(ps -o uid= -p "$PROXY_PID" | tr -d ' ')" = "$HOST_UID"
check "agentctl's nft table for the bridge exists" nft list table inet "agentctl-$BR"
check "the bridge has IPv6 off" test "$(incus network get "$BR" ipv6.address)" = none
RESOLVER_PID=$(json_field 'd["extra"]["Resolver"].split("pid ")[1].split(",")[0]' <<<"$STATUS_JSON")
check "status: the resolver is agentctl's dnsmasq, as the sandbox's uid" \
  grep -Eq "^Resolver: +$GW \(answers allowlisted names only; agentctl's dnsmasq, pid $RESOLVER_PID, as uid $HOST_UID\)" "$WORK/status-a"
check "the resolver process runs as the sandbox's uid" test "$(ps -o uid= -p "${RESOLVER_PID:-0}" | tr -d ' ')" = "$HOST_UID"
check "Incus's own DHCP and DNS are off on the bridge" bash -c \
  "incus network get '$BR' ipv4.dhcp | grep -qx false && incus network get '$BR' dns.mode | grep -qx none"
# A container has its address from LXC; a VM's DHCP client asks agentctl's
# resolver for it. Ask it the way a DHCP client does (DISCOVER from eth0's MAC).
dhcp_py='
import random, socket, struct
hw = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
xid = random.getrandbits(32)
pkt = struct.pack("!BBBBIHHIIII", 1, 1, 6, 0, xid, 0, 0x8000, 0, 0, 0, 0) + hw + bytes(10 + 192)
pkt += bytes([0x63, 0x82, 0x53, 0x63, 53, 1, 1, 255])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"eth0")
try:
    s.bind(("0.0.0.0", 68))
except OSError:
    print("busy"); raise SystemExit  # the guest runs a DHCP client of its own
s.settimeout(5)
s.sendto(pkt, ("255.255.255.255", 67))
while True:
    r = s.recv(1024)
    if r[0] == 2 and r[4:8] == pkt[4:8]:
        print(socket.inet_ntoa(r[16:20])); break
'
IP_A=$(json_field 'd["ips"][0]' <<<"$STATUS_JSON")
offer=$(in_a sudo python3 -c "$dhcp_py" 2>&1)
if [ "$offer" = busy ]; then  # that client's lease is the proof
  check "agentctl's resolver leased the guest's DHCP client its address" \
    grep -q " $IP_A " "$XDG_STATE_HOME/agentctl/incus/$A/resolver.leases"
else
  check "agentctl's resolver offers the sandbox its address by DHCP (what a VM's client gets: $offer)" \
    test "$offer" = "$IP_A"
fi
check "the guest resolves names at the sandbox's resolver" \
  "$AGENTCTL" --provider incus exec "$A" -- grep -qx "nameserver $GW" /etc/resolv.conf
check "the NIC filters MAC and IPv4 sources" bash -c \
  "incus config device get '$A' eth0 security.mac_filtering | grep -qx true && incus config device get '$A' eth0 security.ipv4_filtering | grep -qx true"

# ---------------------------------------------------------------- through the proxy
check "allowlisted name over plain HTTP through the proxy" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- curl -s -m 10 http://allowed.test:$PORT/ | grep -q 'hello from $PUB allowed.test'"
check "allowlisted name over CONNECT (curl -p)" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- curl -s -p -m 10 http://allowed.test:$PORT/ | grep -q 'hello from $PUB'"
check "wildcard subdomain over CONNECT" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- curl -s -p -m 10 http://api.wild.test:$PORT/ | grep -q 'hello from $PUB api.wild.test'"
check "wildcard subdomain over plain HTTP" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- curl -s -m 10 http://api.wild.test:$PORT/ | grep -q 'hello from $PUB'"
out=$(in_a curl -s -m 10 -w '\n%{http_code}' http://other.test:$PORT/)
check "another name gets 403" test "$(tail -n1 <<<"$out")" = 403
check "the 403 names the reason and the command that allows it" bash -c \
  "grep -q 'not-allowlisted' <<<\"\$1\" && grep -q 'agentctl policy add $A other.test:$PORT' <<<\"\$1\"" _ "$out"
check "the wildcard's apex is not allowed (403)" test "$(in_a curl -s -o /dev/null -m 10 -w '%{http_code}' http://wild.test:$PORT/)" = 403
check "the sandbox user has the proxy settings too" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- sh -c 'echo \$https_proxy' | grep -qx 'http://$GW:3128'"
check "login shells get them from /etc/profile.d" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- env -i bash -lc 'echo \$http_proxy' | grep -qx 'http://$GW:3128'"
check "apt, git, pip and npm are configured" "$AGENTCTL" --provider incus exec "$A" -- sh -c \
  "grep -q 'Acquire::https::Proxy \"http://$GW:3128\"' /etc/apt/apt.conf.d/90agentctl-proxy &&
   grep -q 'proxy = http://$GW:3128' /etc/gitconfig && grep -q 'proxy = http://$GW:3128' /etc/pip.conf &&
   grep -q 'https-proxy=http://$GW:3128' /usr/etc/npmrc && grep -q 'https_proxy=http://$GW:3128' /etc/environment"
check "ssh's ProxyCommand helper reaches an allowlisted host:port through CONNECT" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- sh -c 'sleep 1 | /usr/local/bin/agentctl-connect allowed.test $SSH_PORT' | grep -q SSH-2.0-agentctl-test"
check "ssh is configured to use it" "$AGENTCTL" --provider incus exec "$A" -- grep -q "ProxyCommand /usr/local/bin/agentctl-connect %h %p" /etc/ssh/ssh_config.d/90-agentctl-proxy.conf
check "the helper refuses a name the policy does not allow, saying so" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- /usr/local/bin/agentctl-connect other.test $SSH_PORT </dev/null 2>&1 | grep -q 'refused other.test:$SSH_PORT'"

# ---------------------------------------------------------------- around the proxy: refused at once
tcp_probe() { tcp_outcome in_a "$@"; }  # tcp_probe HOST PORT, from inside A
check "curl --noproxy '*' to the allowed name's address is refused at once" \
  refused_at_once "$AGENTCTL" --provider incus exec "$A" -- curl -s -m 5 --noproxy '*' http://$PUB:$PORT/
check "a direct TCP connection to the allowed address is refused" test "$(tcp_probe "$PUB" $PORT)" = refused
check "TCP :53 to a test host is refused" test "$(tcp_probe "$PUB" 53)" = refused
udp53() {  # udp53 HOST NAME -> refused | timeout | answer RCODE COUNT (from inside A)
  in_a python3 -c '
import socket, struct, sys
q = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in sys.argv[2].split(".")) + b"\0\0\1\0\1"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
try:
    s.connect((sys.argv[1], 53)); s.send(q); r = s.recv(512); print("answer %d %d" % (r[3] & 15, struct.unpack(">H", r[6:8])[0]))
except ConnectionRefusedError: print("refused")
except socket.timeout: print("timeout")' "$1" "$2"
}
check "UDP :53 to a test host is refused" test "$(udp53 "$PUB" allowed.test)" = refused
check "DNS for a non-allowlisted name fails (NXDOMAIN from the bridge's resolver)" test "$(udp53 "$GW" other.test)" = "answer 3 0"
check "DNS for an allowlisted name is forwarded to the upstream (its answer comes back)" \
  test "$(udp53 "$GW" allowed.test)" = "answer 0 0"
check "so is a wildcard's subdomain" test "$(udp53 "$GW" deep.api.wild.test)" = "answer 0 0"
check "TCP :53 to the host's other address is refused" bash -c \
  "h=\$(ip -4 -o addr show scope global | awk '\$2 !~ /^(agc-|ag10|incusbr)/ {sub(/\\/.*/, \"\", \$4); print \$4; exit}'); \
   [ -n \"\$h\" ] && test \"\$(\"\$0\" --provider incus exec '$A' -- bash -c \"timeout 4 bash -c 'exec 3<>/dev/tcp/\$h/53' 2>/dev/null && echo connected || echo refused\")\" = refused" "$AGENTCTL"
check "the bridge address on another port is refused" test "$(tcp_probe "$GW" 22)" = refused
check "an IP-literal allow entry is a direct rule: any TCP client reaches it" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- bash -c 'exec 3<>/dev/tcp/$PUB_IP/$RAW_PORT; echo ping >&3; head -n1 <&3' | grep -qx ping"
check "policy check says what the ACL does for the IP rule" bash -c \
  "'$AGENTCTL' --provider incus policy check '$A' $PUB_IP:$RAW_PORT 2>&1 | grep -qi allow"

# ---------------------------------------------------------------- live policy changes
check "policy add succeeds" agentctl policy add "$A" other.test
check "policy add is live in the resolver: other.test is forwarded now" test "$(udp53 "$GW" other.test)" = "answer 0 0"
check "policy add is live: the proxy reloaded" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- curl -s -m 10 http://other.test:$PORT/ | grep -q 'hello from $PUB_IP'"
# An open direct connection to an IP-literal destination is cut when its rule goes.
before=$(established "$NS" "$RAW_PORT")
in_a python3 -c "$HOLD_CONNECTION_PY" "$PUB_IP" "$RAW_PORT" >"$WORK/long-conn" 2>&1 &
LONG=$!
wait_until 60 more_established "$NS" "$RAW_PORT" "$before"
check "policy remove of the IP rule succeeds" agentctl policy remove "$A" "$PUB_IP:$RAW_PORT"
wait $LONG
check "a long-lived direct connection was open" grep -q "^connected" "$WORK/long-conn"
check "policy remove cut the open direct connection" grep -q "^cut" "$WORK/long-conn"
check "after remove, a new direct connection is refused" test "$(tcp_probe "$PUB_IP" $RAW_PORT)" = refused
# An open tunnel through the proxy to a name whose rule goes away.
before=$(established "$NS" "$RAW_PORT")
in_a python3 -c "$HOLD_CONNECTION_PY" "$GW" 3128 other.test:$RAW_PORT >"$WORK/tunnel" 2>&1 &
LONG=$!
wait_until 60 more_established "$NS" "$RAW_PORT" "$before"
check "policy remove of the name succeeds" agentctl policy remove "$A" other.test
wait $LONG
check "a CONNECT tunnel to other.test was open" grep -q "^open HTTP/1.1 200" "$WORK/tunnel"
check "policy remove closed the open tunnel" grep -q "^cut" "$WORK/tunnel"
check "after remove, other.test gets 403 again" test "$(in_a curl -s -o /dev/null -m 10 -w '%{http_code}' http://other.test:$PORT/)" = 403
check "and the resolver answers NXDOMAIN for it again" test "$(udp53 "$GW" other.test)" = "answer 3 0"

# ---------------------------------------------------------------- an upload budget set at create
check "status lists the upload budget set at create" grep -Eq "^  budget allowed\.test:$RAW_PORT +65536 bytes up" "$WORK/status-a"
# UPLOAD_PY HOST PORT TARGET: a CONNECT tunnel to TARGET through the proxy at
# HOST:PORT, then 1 KiB lines up it (the echo comes back) until 512 KiB are
# sent; prints "cut after N" when the proxy ends it, "alive" otherwise.
UPLOAD_PY='
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[3].encode(), sys.argv[3].encode()))
head = b""
while b"\r\n\r\n" not in head: head += s.recv(1)
print("open", head.split(b"\r\n")[0].decode(), flush=True)
sent = 0
try:
    for _ in range(512):
        s.sendall(b"u" * 1023 + b"\n"); sent += 1024
    while s.recv(65536): pass
    print("cut after", sent, flush=True)
except socket.timeout:
    print("alive after", sent, flush=True)
except OSError as e:
    print("cut after", sent, e, flush=True)'
in_a python3 -c "$UPLOAD_PY" "$GW" 3128 "allowed.test:$RAW_PORT" >"$WORK/upload" 2>&1
check "an upload tunnel to the budgeted destination opened" grep -q "^open HTTP/1.1 200" "$WORK/upload"
check "the budget set at create cut the guest's upload ($(tail -n1 "$WORK/upload"))" grep -q "^cut after" "$WORK/upload"
check "the next CONNECT there gets 429" \
  test "$(in_a curl -s -o /dev/null -m 10 -w '%{http_connect}' -p "http://allowed.test:$RAW_PORT/")" = 429
check "the budget is that destination's only: allowed.test:$PORT still answers" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- curl -s -p -m 10 http://allowed.test:$PORT/ | grep -q hello"

# ---------------------------------------------------------------- a grant that ends on time
# The guest asks for a tunnel (refused) until the grant lets it through; the
# grant is given once it asks, and the tunnel is held until the proxy ends it.
before=$(established "$NS" "$RAW_PORT")
in_a python3 -c "$HOLD_CONNECTION_PY" "$GW" 3128 other.test:$RAW_PORT until-open >"$WORK/grant" 2>&1 &
LONG=$!
wait_until 60 grep -q "^asking" "$WORK/grant"
check "policy add --for succeeds" agentctl policy add "$A" other.test:$RAW_PORT --for 10s
wait_until 60 more_established "$NS" "$RAW_PORT" "$before"
check "the granted name resolves at the sandbox's resolver" test "$(udp53 "$GW" other.test)" = "answer 0 0"
check "status shows when the grant ends" bash -c \
  "'$AGENTCTL' --provider incus status '$A' | grep -Eq '^  allow other\.test:$RAW_PORT .*, until [0-9T:-]+Z\$'"
check "status --output json: the grant's expiresAt" bash -c \
  "'$AGENTCTL' --provider incus status '$A' -o json | python3 -c 'import json,sys; a=[r for r in json.load(sys.stdin)[\"network\"][\"allow\"] if r[\"entry\"]==\"other.test:$RAW_PORT\"]; sys.exit(not (a and a[0][\"expiresAt\"].endswith(\"Z\")))'"
wait $LONG
check "the grant let the guest through" grep -q "^open HTTP/1.1 200" "$WORK/grant"
check "the tunnel ended when the grant did" grep -q "^cut" "$WORK/grant"
check "after the grant, other.test:$RAW_PORT gets 403" \
  test "$(in_a curl -s -o /dev/null -m 10 -w '%{http_connect}' -p "http://other.test:$RAW_PORT/")" = 403
# The resolver still answers for the ended grant until it is next restarted: any policy change does that.
check "a later policy change succeeds" agentctl policy add "$A" later.test:$RAW_PORT
check "after the next policy change, the ended grant no longer resolves (NXDOMAIN)" \
  test "$(udp53 "$GW" other.test)" = "answer 3 0"

# ---------------------------------------------------------------- logs --network
agentctl logs "$A" --network >"$WORK/logs" 2>&1
check "logs --network shows the allowed requests" grep -q "allowed.test" "$WORK/logs"
check "logs --network shows the refusals with their reason" bash -c "grep 'other.test' '$WORK/logs' | grep -q 'not-allowlisted'"
check "logs --network --output json is JSON Lines" bash -c \
  "'$AGENTCTL' --provider incus logs '$A' --network --output json | python3 -c 'import json,sys; l=[json.loads(x) for x in sys.stdin if x.strip()]; sys.exit(len(l) < 3)'"

# ---------------------------------------------------------------- the proxy's lifecycle: fail closed
kill -9 "$PROXY_PID"
wait_until 30 test ! -e "/proc/$PROXY_PID"
check "status says the proxy is not running" bash -c "'$AGENTCTL' --provider incus status '$A' | grep -q 'NOT running'"
check "with the proxy gone the sandbox has no egress (refused at once)" \
  refused_at_once "$AGENTCTL" --provider incus exec "$A" -- curl -s -m 5 http://allowed.test:$PORT/
check "and no direct way either" test "$(tcp_probe "$PUB" $PORT)" = refused
agentctl start "$A" >"$WORK/start-a.out" 2>&1
check "start restores the proxy" bash -c "'$AGENTCTL' --provider incus status '$A' | grep -q '(running, pid'"
check "start verifies confinement again" grep -q "network confinement verified (7/7 probes" "$WORK/start-a.out"
check "egress works again after start" bash -c \
  "'$AGENTCTL' --provider incus exec '$A' -- curl -s -m 10 http://allowed.test:$PORT/ | grep -q hello"
check "stop stops the proxy and the resolver" bash -c "'$AGENTCTL' --provider incus stop '$A' >/dev/null && '$AGENTCTL' --provider incus status '$A' >'$WORK/status-stopped' && grep -q '^Egress proxy: .*NOT running' '$WORK/status-stopped' && grep -q '^Resolver: .*NOT running' '$WORK/status-stopped'"
nft delete table inet "agentctl-$BR"   # as after a host reboot
agentctl start "$A" >"$WORK/start-a2.out" 2>&1
check "start after a stop (and a lost nft table) restores proxy, resolver and table" bash -c \
  "'$AGENTCTL' --provider incus status '$A' | grep -q '(running, pid' && '$AGENTCTL' --provider incus status '$A' | grep -q \"^Resolver: .*agentctl's dnsmasq, pid\" && nft list table inet 'agentctl-$BR' >/dev/null"
check "and proves confinement" grep -q "network confinement verified (7/7 probes" "$WORK/start-a2.out"

# ---------------------------------------------------------------- --allow-lan never opens the host or other sandboxes
agentctl create "$B" --image "$IMAGE" --isolation container --mount-none --allow-lan >"$WORK/create-b.out" 2>&1 \
  && ok "create $B --allow-lan" || { cat "$WORK/create-b.out"; bad "create $B --allow-lan"; }
check "--allow-lan: confinement still verified, every probe held" grep -q "network confinement verified (7/7 probes" "$WORK/create-b.out"
BR_B=$(agentctl status "$B" -o json | json_field 'd["extra"]["bridge"]')
GW_B=$(incus network get "$BR_B" ipv4.address | cut -d/ -f1)
IP_A=$(agentctl status "$A" -o json | json_field 'd["ips"][0]')
in_b_tcp() { agentctl exec "$B" -- bash -c "timeout 4 bash -c 'exec 3<>/dev/tcp/$1/$2' 2>/dev/null && echo connected || echo refused"; }
check "--allow-lan: the host's bridge address is refused directly" test "$(in_b_tcp "$GW_B" 22)" = refused
check "--allow-lan: another sandbox's bridge address is refused" test "$(in_b_tcp "$GW" 3128)" = refused
check "--allow-lan: another sandbox is refused directly" test "$(in_b_tcp "$IP_A" 22)" = refused
code=$(agentctl exec "$B" -- curl -s -o /dev/null -m 10 -w '%{http_connect}' -p "http://$GW_B:22/")
check "--allow-lan: the proxy refuses the host's own address (403)" test "$code" = 403
code=$(agentctl exec "$B" -- curl -s -o /dev/null -m 10 -w '%{http_connect}' -p "http://$IP_A:$PORT/")
check "--allow-lan: the proxy cannot reach another sandbox ($code)" test "$code" != 200
# Through B's proxy, decided when dialling from the kernel's routes: A's
# gateway (where A's proxy listens) is this machine's own address, and A
# behind its bridge (veth ports only) is another sandbox.
reason_via_proxy() {  # reason_via_proxy HOST PORT -> the X-Agentctl-Reason of B's proxy's answer to CONNECT
  agentctl exec "$B" -- curl -sv -o /dev/null -m 10 -p "http://$1:$2/" 2>&1 \
    | tr -d '\r' | sed -n 's/^< X-Agentctl-Reason: //Ip' | head -1
}
check "--allow-lan: B's proxy refuses A's gateway and A's proxy on it (host-address)" \
  test "$(reason_via_proxy "$GW" 3128)" = host-address
check "--allow-lan: B's proxy refuses sandbox A behind its bridge (sandbox-network)" \
  test "$(reason_via_proxy "$IP_A" "$PORT")" = sandbox-network

# ---------------------------------------------------------------- a resolver agentctl did not start
# Replace the sandbox's resolver behind agentctl's back with the same dnsmasq,
# started by hand, that answers every name: agentctl knows the process it
# started (pid, start time, executable), so it does not take this one for its
# own. start refuses to run beside it and stops the sandbox; status never
# calls it the sandbox's resolver.
RPID_B=$(agentctl status "$B" -o json | json_field 'd["extra"]["Resolver"].split("pid ")[1].split(",")[0]')
mapfile -d '' RARGS <"/proc/$RPID_B/cmdline"
kill "$RPID_B"
wait_until 30 test ! -e "/proc/$RPID_B"
for i in "${!RARGS[@]}"; do [ "${RARGS[$i]}" = "--address=/#/" ] && RARGS[$i]="--address=/#/203.0.113.9"; done
setsid "${RARGS[@]}" >/dev/null 2>&1 </dev/null &
TAMPERED=$!
GW_B=$(incus network get "$(agentctl status "$B" -o json | json_field 'd["extra"]["bridge"]')" ipv4.address | cut -d/ -f1)
check "the tampered resolver runs in place of agentctl's" wait_until 60 bash -c "exec 3<>/dev/tcp/$GW_B/53"
check "status does not call it the sandbox's resolver" bash -c \
  "agentctl status '$B' | grep -E '^Resolver:' | grep -q 'NOT running'"
out=$(agentctl start "$B" 2>&1); rc=$?
check "start refuses to run beside it (exit $rc)" test $rc != 0
check "the error names the process that is not agentctl's" grep -q "pid $TAMPERED, .*not the resolver agentctl started" <<<"$out"
check "the sandbox was stopped" bash -c "incus list -f csv -c s '^$B\$' | grep -qx STOPPED"
check "the other process was left running" kill -0 "$TAMPERED"
kill "$TAMPERED"

# ---------------------------------------------------------------- delete removes everything
agentctl delete --force "$B" >/dev/null 2>&1
agentctl delete --force "$A" >/dev/null 2>&1
check "delete stops the proxy" bash -c "! kill -0 \$(pgrep -f 'egress-proxy .*--sandbox $A\$' || echo 999999) 2>/dev/null"
check "delete removes the nft table" bash -c "! nft list table inet 'agentctl-$BR' >/dev/null 2>&1"
check "delete stops the resolvers" bash -c "! pgrep -f '[d]nsmasq .*--pid-file=$XDG_STATE_HOME/agentctl/incus/' >/dev/null"
check "delete removes the proxy's state" test ! -e "$XDG_STATE_HOME/agentctl/incus/$A"

finish
