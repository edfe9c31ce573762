#!/bin/bash
# Lab 0016: one dependent cache miss into a 100 MiB region against the operations of
# `perf sequence` (10M records, 1 thread: set, get, remove), senju and Tkrzw, alternating,
# fresh files every round.
#   lab/0016-get-floor/run.sh [ROUNDS]
# Environment: SENJU (default target/engine/release/senju), TKRZW (tkrzw_dbm_perf), DIR
# (default /tmp/senju-lab-0016).
set -eu
rounds=${1:-3}
here=$(cd "$(dirname "$0")" && pwd)
senju=${SENJU:-target/engine/release/senju}
tkrzw=${TKRZW:-tkrzw_dbm_perf}
dir=${DIR:-/tmp/senju-lab-0016}
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
gcc -O2 -o "$dir/lat" "$here/lat.c"
echo "# $(date -u +%FT%TZ) nproc=$(nproc) cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?') load=$(cut -d' ' -f1 /proc/loadavg)"
# The QPS of the set, get and remove phases, in that order.
qps() { grep -E "^(Setting|Getting|Removing) done" | grep -o "qps=[0-9]*" | cut -d= -f2 | tr '\n' ' '; }
for _ in $(seq "$rounds"); do
  "$dir/lat" 100 | tail -1
  "$dir/lat" 100 thp | tail -1
  rm -f "$dir"/*.sj "$dir"/*.tkh
  s=$("$senju" perf sequence --path "$dir/s.sj" --iter 10000000 --threads 1 | qps)
  rm -f "$dir"/*.sj
  t=$("$tkrzw" sequence --path "$dir/t.tkh" --iter 10000000 --threads 1 --buckets 20000000 | qps)
  rm -f "$dir"/*.tkh
  # shellcheck disable=SC2086
  set -- $s $t
  awk -v s1="$1" -v s2="$2" -v s3="$3" -v t1="$4" -v t2="$5" -v t3="$6" 'BEGIN {
    split("set get remove", op, " "); s[1] = s1; s[2] = s2; s[3] = s3; t[1] = t1; t[2] = t2; t[3] = t3
    for (i = 1; i <= 3; i++)
      printf "%s: senju %d/s (%.1f ns), tkrzw %d/s (%.1f ns), %.2fx\n", op[i], s[i], 1e9 / s[i], t[i], 1e9 / t[i], s[i] / t[i]
  }'
done
