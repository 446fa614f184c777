# Shared by the Incus benchmarks (run.sh, create-phases.sh, exec.sh): a clock
# in milliseconds and the statistics they print. Source it.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
p95() { sort -n | awk '{a[NR]=$1} END {i=int(NR*0.95+0.999); if (i<1) i=1; print a[i]}'; }
