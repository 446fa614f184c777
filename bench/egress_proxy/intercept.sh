#!/usr/bin/env bash
# Benchmarks the egress proxy's TLS termination (the path of the hosts a
# secret is bound to) in one run, side by side with a direct TLS client and
# with the plain CONNECT tunnel. The origin is nginx serving a 1 KiB file over
# HTTPS (its own test CA) in a network namespace this script creates; the
# client is curl, one at a time (concurrency 1), sending the same
# `Authorization: Bearer PLACEHOLDER` header on every path:
#
#   direct     curl -> origin (TLS end to end)
#   tunnel     curl -> proxy CONNECT, an opaque tunnel -> origin (TLS end to end)
#   intercept  curl -> proxy CONNECT, TLS with the proxy under a certificate of
#              the sandbox CA; the proxy opens TLS to the origin (checked
#              against the test CA) and replaces the placeholder in the header
#
# Keep-alive: REQUESTS GETs on one connection; requests/s and the mean time
# per request. New connections: HANDSHAKES GETs with `Connection: close` and
# no TLS session reuse; the median time to the end of the client's TLS
# handshake and to the end of the response. The proxy keeps one certificate
# per terminated host for its lifetime (LeafCertificates); there is no way to
# run it without that cache, so "cold" is the first connection to each of
# HANDSHAKES hosts (each mints a certificate) and "warm" the second round to
# the same hosts. Prints a Markdown table; each figure is the median of ROUNDS.
#
#   sudo bench/egress_proxy/intercept.sh [BUILD_DIR]   (default: build-release; needs agentctl built there)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-release}
REQUESTS=${REQUESTS:-2000}
HANDSHAKES=${HANDSHAKES:-200}
ROUNDS=${ROUNDS:-3}
PORT=18121
PLACEHOLDER=agentctl-secret-bench-0123456789abcdef

[ "$(id -u)" = 0 ] || { echo "intercept.sh: needs root to create the origin's network namespace" >&2; exit 1; }
AGENTCTL=$BUILD/src/agentctl
[ -x "$AGENTCTL" ] || { echo "intercept.sh: no agentctl in $BUILD (bench/egress_proxy/run.sh builds it)" >&2; exit 1; }
for tool in nginx curl openssl python3; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || { echo "intercept.sh: $tool is needed" >&2; exit 1; }
done
export PATH=$PATH:/usr/sbin

. "$ROOT/bench/egress_proxy/origin.sh" tls t

# ---------------------------------------------------------------- certificates: the origin's test CA, the sandbox CA
hosts=()
for i in $(seq 1 "$HANDSHAKES"); do hosts+=("h$i.bench.test"); done
(
  cd "$WORK"
  for ca in origin sandbox; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $ca-ca.key -out $ca-ca.crt \
      -subj "/CN=agentctl bench $ca CA" -days 2 -addext basicConstraints=critical,CA:TRUE \
      -addext keyUsage=critical,keyCertSign
  done
  printf 'subjectAltName=DNS:*.bench.test\nauthorityKeyIdentifier=keyid\n' >origin.ext
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout origin.key -out origin.csr -subj /CN=bench.test
  openssl x509 -req -in origin.csr -CA origin-ca.crt -CAkey origin-ca.key -CAcreateserial -out origin.crt -days 2 \
    -extfile origin.ext
) >/dev/null 2>&1

# ---------------------------------------------------------------- origin: nginx over TLS
start_origin
cat >"$WORK/nginx-tls.conf" <<NGINX
worker_processes 1;
pid $WORK/nginx-tls.pid;
error_log $WORK/nginx-tls-error.log;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 10000000; keepalive_timeout 600;
  ssl_session_cache off; ssl_session_tickets off;
  server { listen $ORIGIN:443 ssl backlog=4096; ssl_certificate $WORK/origin.crt;
           ssl_certificate_key $WORK/origin.key; root $WORK/www; location / { } }
}
NGINX
ip netns exec "$NS" nginx -c "$WORK/nginx-tls.conf" -g 'daemon off;' &
PIDS+=($!)

# ---------------------------------------------------------------- the proxy: every h*.bench.test bound, tunnel.bench.test not
python3 - "$WORK" "$ORIGIN" "$PLACEHOLDER" "${hosts[@]}" <<'PY'
import json, sys
work, origin, placeholder, hosts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
names = hosts + ["tunnel.bench.test"]
policy = {"version": 1, "enabled": True, "denyLAN": True, "allowLAN": False,
          "allow": [{"domain": h, "ports": [443], "origin": "bench"} for h in names],
          "dns": {"servers": [], "disabled": False}}
json.dump(policy, open(work + "/policy.json", "w"))
open(work + "/hosts", "w").write(origin + " " + " ".join(names) + "\n")
read = lambda name: open(work + "/" + name).read()
payload = {"ca": {"cert": read("sandbox-ca.crt"), "key": read("sandbox-ca.key")},
           "secrets": [{"name": "bench", "placeholder": placeholder, "value": "bench-real-value-0123456789",
                        "bindings": [{"host": h, "header": "authorization"} for h in hosts]}]}
json.dump(payload, open(work + "/payload.json", "w"))
PY
"$AGENTCTL" egress-proxy --listen 127.0.0.1:$PORT --policy "$WORK/policy.json" --resolve-file "$WORK/hosts" \
  --log "$WORK/proxy.log" --sandbox bench --secrets-fd 3 --upstream-ca "$WORK/origin-ca.crt" \
  3<"$WORK/payload.json" >/dev/null 2>"$WORK/proxy.err" &
PIDS+=($!)
rm -f "$WORK/payload.json" "$WORK/sandbox-ca.key"
wait_port "$ORIGIN" 443
wait_port 127.0.0.1 $PORT

# curl for PATH (direct, tunnel, intercept) and the URL(s); one line per transfer on stderr:
# "TIME_APPCONNECT TIME_TOTAL HTTP_CODE".
fetch() {
  local path=$1
  shift
  local args=(-s --no-sessionid -H "Authorization: Bearer $PLACEHOLDER" -w '%{stderr}%{time_appconnect} %{time_total} %{http_code}\n')
  case $path in
    direct) args+=(--cacert "$WORK/origin-ca.crt" --resolve "h1.bench.test:443:$ORIGIN" --resolve "tunnel.bench.test:443:$ORIGIN") ;;
    tunnel) args+=(--cacert "$WORK/origin-ca.crt" -x "http://127.0.0.1:$PORT") ;;
    intercept) args+=(--cacert "$WORK/sandbox-ca.crt" -x "http://127.0.0.1:$PORT") ;;
  esac
  curl "${args[@]}" "$@" 2>&1 >/dev/null
}
host_of() { [ "$1" = intercept ] && echo "h1.bench.test" || echo "tunnel.bench.test"; }
# Keep-alive: requests/s and ms per request.
keepalive() {
  local out start end
  start=$(date +%s%N)
  out=$(fetch "$1" "https://$(host_of "$1")/1k?[1-$REQUESTS]")
  end=$(date +%s%N)
  [ "$(grep -c ' 200$' <<<"$out")" = "$REQUESTS" ] || { echo "intercept.sh: $1: not every request got 200" >&2; exit 1; }
  python3 -c "import sys; s=(int(sys.argv[2])-int(sys.argv[1]))/1e9; print(round(int(sys.argv[3])/s), round(s/int(sys.argv[3])*1000, 3))" \
    "$start" "$end" "$REQUESTS"
}
# New connections to URL(s): median ms to the end of the TLS handshake, and to the end of the response.
connections() {
  local path=$1 out
  shift
  out=$(fetch "$path" -H 'Connection: close' "$@")
  [ "$(grep -vc ' 200$' <<<"$out")" = 0 ] || { echo "intercept.sh: $path: a request did not get 200" >&2; exit 1; }
  python3 -c "import statistics,sys; rows=[l.split() for l in sys.stdin if l.strip()]
print(round(statistics.median(float(r[0]) for r in rows)*1000, 3), round(statistics.median(float(r[1]) for r in rows)*1000, 3))" <<<"$out"
}

declare -A R
for round in $(seq 1 "$ROUNDS"); do
  for path in direct tunnel intercept; do
    read -r rps ms < <(keepalive $path)
    R[$path,rps]+=" $rps"
    R[$path,ms]+=" $ms"
    read -r hs total < <(connections $path "https://$(host_of $path)/1k?[1-$HANDSHAKES]")
    R[$path,hs]+=" $hs"
    R[$path,total]+=" $total"
  done
  # The certificate cache: the first connection to each host of this round
  # mints its certificate (cold); the same hosts again use the cached one (warm).
  # Each round uses hosts no earlier round used, so each round starts cold.
  first=$(( (round - 1) * HANDSHAKES / ROUNDS + 1 ))
  last=$(( round * HANDSHAKES / ROUNDS ))
  urls=()
  for i in $(seq "$first" "$last"); do urls+=("https://h$i.bench.test/1k"); done
  read -r hs total < <(connections intercept "${urls[@]}")
  R[cold,hs]+=" $hs"
  R[cold,total]+=" $total"
  read -r hs total < <(connections intercept "${urls[@]}")
  R[warm,hs]+=" $hs"
  R[warm,total]+=" $total"
done

m() { median 3 ${R[$1]}; }
echo "| path | keep-alive req/s | ms per request | new connection: TLS handshake done, ms | new connection: response done, ms |"
echo "|---|---|---|---|---|"
for path in direct tunnel intercept; do
  echo "| $path | $(m $path,rps) | $(m $path,ms) | $(m $path,hs) | $(m $path,total) |"
done
echo
echo "| intercept, certificate cache | TLS handshake done, ms | response done, ms |"
echo "|---|---|---|"
echo "| cold (first connection to a host: a certificate is minted) | $(m cold,hs) | $(m cold,total) |"
echo "| warm (the host's certificate is cached) | $(m warm,hs) | $(m warm,total) |"
