#!/bin/bash
# Lab 0016: one dependent cache miss into a 100 MiB region against a get of `perf sequence`
# (10M records, 1 thread), senju and Tkrzw, alternating.
#   lab/0016-get-floor/run.sh [ROUNDS]
# Environment: SENJU (default target/engine/release/senju), TKRZW (tkrzw_dbm_perf), DIR
# (default /tmp/senju-lab-0016; the two databases are made once, then only read).
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
"$senju" perf sequence --path "$dir/s.sj" --iter 10000000 --threads 1 --set_only | grep "Setting done"
"$tkrzw" sequence --path "$dir/t.tkh" --iter 10000000 --threads 1 --buckets 20000000 --set_only | grep "Setting done"
qps() { grep -o "Getting done.*qps=[0-9]*" | grep -o "[0-9]*$"; }
for _ in $(seq "$rounds"); do
  "$dir/lat" 100 | tail -1
  "$dir/lat" 100 thp | tail -1
  s=$("$senju" perf sequence --path "$dir/s.sj" --iter 10000000 --threads 1 --get_only | qps)
  t=$("$tkrzw" sequence --path "$dir/t.tkh" --iter 10000000 --threads 1 --buckets 20000000 --get_only | qps)
  awk -v s="$s" -v t="$t" 'BEGIN { printf "get: senju %d/s (%.1f ns), tkrzw %d/s (%.1f ns), %.2fx\n", s, 1e9 / s, t, 1e9 / t, s / t }'
done
