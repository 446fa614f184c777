# Shared by the Incus benchmarks (run.sh, create-phases.sh, exec.sh): their
# header, a clock in milliseconds and the statistics they print. Source it.

# bench_start NAME: IMAGE, and WORK (a scratch directory /tmp/agentctl-incus-NAME.*,
# for the bench's cleanup to remove) holding the HOME agentctl runs with; stops
# when no Incus daemon answers.
bench_start() {
  IMAGE=${AGENTCTL_INCUS_IMAGE:-agentctl-debian-12}
  incus admin waitready --timeout=3 >/dev/null 2>&1 || { echo "no Incus daemon (scripts/incus/up.sh)"; exit 1; }
  WORK=$(mktemp -d "/tmp/agentctl-incus-$1.XXXXXX")
  export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config
  mkdir -p "$HOME"
}
# raw_bridge NAME SUBNET: the bridge the raw incus containers run on (NAT, no IPv6).
raw_bridge() { incus network create "$1" ipv4.address="$2" ipv4.nat=true ipv6.address=none >/dev/null || exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
p95() { sort -n | awk '{a[NR]=$1} END {i=int(NR*0.95+0.999); if (i<1) i=1; print a[i]}'; }
