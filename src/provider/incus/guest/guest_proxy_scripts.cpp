#include "provider/incus/guest/guest_proxy_scripts.hpp"

#include <fmt/format.h>

#include "agentctl/process.hpp"
#include "provider/common/guest_environment.hpp"

namespace agentctl::provider::incus {

std::string proxy_url(const std::string& address, std::uint16_t port) {
    return fmt::format("http://{}:{}", address, port);
}

std::map<std::string, std::string> proxy_environment(const std::string& url) {
    const std::string no_proxy = "localhost,127.0.0.1,::1";
    return {{"http_proxy", url},    {"https_proxy", url},   {"HTTP_PROXY", url},       {"HTTPS_PROXY", url},
            {"no_proxy", no_proxy}, {"NO_PROXY", no_proxy}, {"npm_config_proxy", url}, {"npm_config_https_proxy", url},
            {"PIP_PROXY", url}};
}

std::string proxy_setup_script(const std::string& address, std::uint16_t port, const std::string& resolver) {
    const auto url = proxy_url(address, port);
    return fmt::format(
        R"SH(set -eu
umask 022
# /etc/environment (PAM) and login shells.
{environment}# Names resolve at the sandbox's own resolver on the bridge (allowlisted
# names only), unless a local resolver (systemd-resolved's stub) manages the file.
if [ ! -L /etc/resolv.conf ]; then
  printf '%s\nnameserver %s\n' "$mark" {resolver} >/etc/resolv.conf.agentctl && mv /etc/resolv.conf.agentctl /etc/resolv.conf
fi
# apt ignores https_proxy in some paths; say it in its own configuration.
if [ -d /etc/apt ]; then
  mkdir -p /etc/apt/apt.conf.d
  printf '%s\nAcquire::http::Proxy "%s";\nAcquire::https::Proxy "%s";\n' "// $mark" {url} {url} \
    >/etc/apt/apt.conf.d/90agentctl-proxy
fi
# git (system-wide), npm (global npmrc in both places npm looks), pip.
if command -v git >/dev/null 2>&1; then
  git config --system http.proxy {url}
  git config --system https.proxy {url}
else
  printf '[http]\n\tproxy = %s\n[https]\n\tproxy = %s\n' {url} {url} >>/etc/gitconfig
fi
for f in /etc/npmrc /usr/etc/npmrc; do
  mkdir -p "$(dirname "$f")"; touch "$f"
  grep -v -e '^proxy=' -e '^https-proxy=' "$f" >"$f.agentctl" || true
  printf 'proxy=%s\nhttps-proxy=%s\n' {url} {url} >>"$f.agentctl"; mv "$f.agentctl" "$f"
done
printf '%s\n[global]\nproxy = %s\n' "$mark" {url} >/etc/pip.conf
# ssh through the proxy: HTTP CONNECT from a bash /dev/tcp helper.
mkdir -p /usr/local/bin /etc/ssh/ssh_config.d
cat >/usr/local/bin/agentctl-connect <<'HELPER'
#!/bin/bash
# agentctl-connect HOST PORT: an ssh ProxyCommand through the sandbox's egress proxy.
set -u
exec 3<>/dev/tcp/{address}/{port} || {{ echo "agentctl-connect: the egress proxy {address}:{port} is not reachable" >&2; exit 1; }}
printf 'CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n' "$1" "$2" "$1" "$2" >&3
IFS= read -r status <&3 || exit 1
status=${{status%$'\r'}}
case "$status" in
  "HTTP/1."?" 200"*) ;;
  *) echo "agentctl-connect: the egress proxy refused $1:$2: $status" >&2
     while IFS= read -r -t 2 line <&3; do echo "${{line%$'\r'}}" >&2; done
     exit 1 ;;
esac
while IFS= read -r line <&3; do [ -z "${{line%$'\r'}}" ] && break; done
cat <&3 &
cat >&3
kill $! 2>/dev/null
HELPER
chmod 0755 /usr/local/bin/agentctl-connect
printf '%s\nHost *\n    ProxyCommand /usr/local/bin/agentctl-connect %%h %%p\n' "$mark" \
  >/etc/ssh/ssh_config.d/90-agentctl-proxy.conf
echo agentctl-proxy-configured
)SH",
        fmt::arg("environment",
                 common::environment_files_script("# agentctl egress proxy", "/etc/profile.d/agentctl-proxy.sh",
                                                  proxy_environment(url))),
        fmt::arg("url", shell_quote(url)), fmt::arg("address", address), fmt::arg("port", port),
        fmt::arg("resolver", shell_quote(resolver)));
}

std::string with_proxy_setup(const std::string& main, const std::string& setup) {
    // No temporary file: a container's /tmp may be mounted over while it boots.
    return fmt::format(R"SH(( {setup} ) &
agentctl_setup_pid=$!
( {main} )
agentctl_main_rc=$?
wait "$agentctl_setup_pid"; agentctl_setup_rc=$?
[ "$agentctl_main_rc" = 0 ] || exit "$agentctl_main_rc"
exit "$agentctl_setup_rc"
)SH",
                       fmt::arg("main", main), fmt::arg("setup", setup));
}

const std::vector<std::string>& probe_names() {
    static const std::vector<std::string> names{"direct-bypass",     "host-port",         "host-address",
                                                "dns-tcp-elsewhere", "dns-udp-elsewhere", "proxy-denied-name",
                                                "dns-denied-name"};
    return names;
}

std::string probe_battery_script(const ProbeTargets& targets, int timeout_seconds) {
    return fmt::format(R"SH(unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
t={t}; gw={gw}; px={px}; pp={pp}; gc={gc}; oh={oh}; oc={oc}; un={un}; dc={dc}; name=agentctl-probe.invalid
# Every probe prints its one line straight to stdout (no temporary files: a
# booting container's /tmp may be mounted over meanwhile).
say() {{ echo "agentctl-probe $*"; }}
tcp() {{ # NAME HOST PORT WHAT
  if ! command -v bash >/dev/null 2>&1 || ! command -v timeout >/dev/null 2>&1; then
    say "$1" inconclusive "$4: the guest has no bash and timeout to probe with"; return; fi
  err=$(timeout "$t" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$2" "$3" 2>&1); rc=$?
  if [ $rc = 0 ]; then say "$1" escaped "$4 connected"
  elif [ $rc = 124 ]; then say "$1" inconclusive "$4 got no answer within $t s (dropped, not rejected)"
  else say "$1" held "$4 was rejected (${{err##*: }})"; fi
}}
dns() {{ # NAME HOST WHAT: a UDP query for $name; prints refused | timeout | answer RCODE COUNT | error
  if ! command -v python3 >/dev/null 2>&1; then echo no-tool; return; fi
  python3 - "$1" "$t" "$name" <<'PY'
import socket, struct, sys
host, t, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
q = struct.pack(">HHHHHH", 0x4147, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(t)
try:
    s.connect((host, 53)); s.send(q); r = s.recv(512)
    print("answer %d %d" % (r[3] & 15, struct.unpack(">H", r[6:8])[0]))
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
except OSError as e:
    print("error %s" % e.strerror)
PY
}}
tcp direct-bypass "$un" 443 "a direct TCP connection to $un:443 (no proxy)" &
if [ "$gc" != 0 ]; then tcp host-port "$gw" "$gc" "TCP to the host at $gw:$gc" &
else say host-port skipped "the Incus server is not this machine: no listener of agentctl's on $gw"; fi
if [ -n "$oh" ]; then
  tcp host-address "$oh" "$oc" "TCP to the host's other address $oh:$oc" &
  tcp dns-tcp-elsewhere "$oh" 53 "TCP to $oh:53 (not the sandbox's resolver)" &
elif [ "$gc" = 0 ]; then
  say host-address skipped "the Incus server is not this machine: no listener of agentctl's there"
  say dns-tcp-elsewhere skipped "the Incus server is not this machine: no listener of agentctl's there"
else
  say host-address held "the host has no other address to try"
  say dns-tcp-elsewhere held "the host has no other address to try"
fi
(r=$(dns "$un"); w="a UDP DNS query to $un:53 (not the sandbox's resolver)"
 case "$r" in refused|error*) say dns-udp-elsewhere held "$w was rejected ($r)" ;;
   answer*) say dns-udp-elsewhere escaped "$w was answered" ;;
   no-tool) say dns-udp-elsewhere inconclusive "$w: the guest has no python3" ;;
   *) say dns-udp-elsewhere inconclusive "$w got no answer within $t s (dropped, not rejected)" ;; esac) &
(w="CONNECT $name:443 through the proxy $px:$pp"
 if command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then
   # The proxy may still be coming up right after create: a refused connection
   # (no answer at all) is tried again for up to 3 s.
   n=0
   while :; do
     out=$(timeout "$t" bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 3
       printf "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" "$2" "$2" >&3; IFS= read -r l <&3; printf "%s" "$l"' \
       "$px" "$pp" "$name" 2>/dev/null | tr -d '\r')
     [ -z "$out" ] && [ $n -lt 15 ] || break
     n=$((n + 1)); sleep 0.2
   done
   case "$out" in
     "HTTP/1."?" 403"*) say proxy-denied-name held "$w was refused ($out)" ;;
     "HTTP/1."?" "[45]*) say proxy-denied-name held "$w got no tunnel ($out)" ;;
     "HTTP/1."?" 2"*) say proxy-denied-name escaped "$w was accepted ($out)" ;;
     "") say proxy-denied-name inconclusive "$w: the proxy did not answer (is it running?)" ;;
     *) say proxy-denied-name inconclusive "$w answered $out" ;;
   esac
 else say proxy-denied-name inconclusive "$w: the guest has no bash and timeout to probe with"; fi) &
(w="the bridge's resolver $gw for $name"
 # Right after create the bridge's dnsmasq may still be restarting with its
 # allowlist: a refusal from the gateway means "not up yet", so ask again (<= 3 s).
 n=0; r=$(dns "$gw")
 [ "$dc" = 1 ] && n=15
 while case "$r" in refused|error*) [ $n -lt 15 ] ;; *) false ;; esac; do n=$((n + 1)); sleep 0.2; r=$(dns "$gw"); done
 case "$dc $r" in "1 refused"|"1 error"*) say dns-denied-name held "$w was refused (network.dns.disabled) ($r)" ;;
   "1 answer"*) say dns-denied-name inconclusive "$w answered though network.dns.disabled closes it ($r)" ;;
   *) case "$r" in "answer 3 "*|"answer 5 "*|"answer 0 0") say dns-denied-name held "$w answered no address ($r)" ;;
   answer*) say dns-denied-name escaped "$w resolved it ($r)" ;;
   no-tool) say dns-denied-name inconclusive "$w: the guest has no python3" ;;
   *) say dns-denied-name inconclusive "$w: $r" ;; esac ;; esac) &
wait
)SH",
                       fmt::arg("t", timeout_seconds), fmt::arg("gw", shell_quote(targets.gateway)),
                       fmt::arg("px", shell_quote(targets.proxy.empty() ? targets.gateway : targets.proxy)),
                       fmt::arg("pp", targets.proxy_port), fmt::arg("gc", targets.gateway_canary),
                       fmt::arg("oh", shell_quote(targets.other_host_address)), fmt::arg("oc", targets.other_canary),
                       fmt::arg("un", shell_quote(targets.unrouted)), fmt::arg("dc", targets.dns_closed ? 1 : 0));
}

}  // namespace agentctl::provider::incus
