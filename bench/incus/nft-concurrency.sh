#!/usr/bin/env bash
# nft-concurrency.sh - WRITERS nft runs at once against the same runs one at a
# time (under one flock, as agentctl runs them: the host's firewall lock), in
# one run: each writer replaces a table shaped like a sandbox's firewall table
# ROUNDS times; prints the median and longest single `nft -f` and the wall time
# of each way. The tables are the benchmark's own (inet agentctl-bench-nft-*),
# hooked on interfaces that do not exist, and removed at the end.
#
# Usage: bench/incus/nft-concurrency.sh [WRITERS (16)] [ROUNDS (5)]     (as root)
set -uo pipefail
WRITERS=${1:-16}
ROUNDS=${2:-5}
WORK=$(mktemp -d /tmp/agentctl-bench-nft.XXXXXX)
cleanup() {
  for i in $(seq 1 "$WRITERS"); do nft delete table inet "agentctl-bench-nft-$i" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

table() {  # table N: the script that replaces table N
  cat <<EOF
table inet agentctl-bench-nft-$1 {}
delete table inet agentctl-bench-nft-$1
table inet agentctl-bench-nft-$1 {
  chain input {
    type filter hook input priority filter - 5; policy accept;
    iifname "agcbenchnft$1" jump from_sandbox
  }
  chain from_sandbox {
    meta nfproto ipv6 reject
    ip daddr { 10.213.255.1, 255.255.255.255 } udp dport 67 accept
    ip daddr 10.213.255.1 tcp dport { 53, 3128 } accept
    meta l4proto tcp reject with tcp reset
    reject
  }
  chain forward {
    type filter hook forward priority filter - 5; policy accept;
    iifname "agcbenchnft$1" oifname "agc-*" reject
    iifname "agcbenchnft$1" meta l4proto tcp ct state new reject with tcp reset
  }
}
EOF
}

# run WAY [WRAPPER...]: every writer at once, each nft run through WRAPPER.
run() {
  local way=$1 start end
  shift
  rm -f "$WORK"/t.*
  start=$(date +%s%N)
  for i in $(seq 1 "$WRITERS"); do
    (for _ in $(seq 1 "$ROUNDS"); do
      local s e
      s=$(date +%s%N)
      table "$i" | "$@" nft -f - || echo "nft failed (writer $i)" >&2
      e=$(date +%s%N)
      echo $(((e - s) / 1000000))
    done) >"$WORK/t.$i" &
  done
  wait
  end=$(date +%s%N)
  sort -n "$WORK"/t.* | awk -v way="$way" -v wall=$(((end - start) / 1000000)) \
    '{a[NR]=$1} END {printf "%-22s %4d runs  median %6d ms  longest %6d ms  wall %6d ms\n", way, NR, a[int(NR/2)+1], a[NR], wall}'
}

echo "$WRITERS writers, $ROUNDS tables each, $(nproc) cores"
run "at once" env
run "one at a time (flock)" flock "$WORK/lock"
