#!/bin/bash
# Lab 0015: `senju perf parallel --random_key` against `tkrzw_dbm_perf parallel --random_key`
# at 2 threads (issue 3: senju >= 2x), alternating, one process per run, files deleted between
# runs; a markdown table of medians with min-max on stdout.
#
#   lab/0015-parallel-random/run.sh [ROUNDS]
#
# Environment: SENJU (default target/engine/release/senju), TKRZW (tkrzw_dbm_perf), DIR
# (default /tmp/senju-lab-0015), SIZES (default "1000000:4000000 5000000:20000000": operations
# per thread, a colon, Tkrzw's --buckets, i.e. twice the keys' range of iter x threads),
# THREADS (default 2).
set -eu
rounds=${1:-5}
senju=${SENJU:-target/engine/release/senju}
tkrzw=${TKRZW:-tkrzw_dbm_perf}
dir=${DIR:-/tmp/senju-lab-0015}
sizes=${SIZES:-"1000000:4000000 5000000:20000000"}
threads=${THREADS:-2}
command -v "$tkrzw" >/dev/null || { echo "run.sh: $tkrzw not found (apt install tkrzw-utils)" >&2; exit 2; }
[ -x "$senju" ] || { echo "run.sh: $senju not built (CARGO_TARGET_DIR=target/engine cargo build --release -p senju-cli)" >&2; exit 2; }
mkdir -p "$dir"
log=$(mktemp)
trap 'rm -f "$log"; rm -rf "$dir"' EXIT
echo "<!-- $(date -u +%FT%TZ) nproc=$(nproc) cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?') load=$(cut -d' ' -f1 /proc/loadavg) rounds=$rounds threads=$threads -->"
qps() { grep -o "^Done: .*qps=[0-9]*" | grep -o "qps=[0-9]*" | cut -d= -f2; }
for size in $sizes; do
  n=${size%%:*} buckets=${size##*:}
  for r in $(seq "$rounds"); do
    rm -f "$dir"/*
    s=$("$senju" perf parallel --path "$dir/p.sj" --iter "$n" --threads "$threads" --random_key 2>&1 | qps)
    rm -f "$dir"/*
    t=$("$tkrzw" parallel --path "$dir/p.tkh" --iter "$n" --threads "$threads" --random_key \
      --buckets "$buckets" 2>&1 | qps)
    echo "$n $r $s $t" | tee -a "$log" >&2
  done
done
echo
echo "| iter per thread | Tkrzw --buckets | senju QPS median (min-max) | Tkrzw QPS median (min-max) | senju/tkrzw | rounds senju ahead by 2x |"
echo "|---|---|---|---|---|---|"
python3 - "$log" "$sizes" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for size in sys.argv[2].split():
    n, buckets = size.split(":")
    s = [int(r[2]) for r in rows if r[0] == n]
    t = [int(r[3]) for r in rows if r[0] == n]
    m = lambda v: f"{statistics.median(v) / 1e6:.2f}M ({min(v) / 1e6:.2f}M-{max(v) / 1e6:.2f}M)"
    ahead = sum(a >= 2 * b for a, b in zip(s, t))
    print(f"| {int(n):,} | {int(buckets):,} | {m(s)} | {m(t)} | "
          f"{statistics.median(s) / statistics.median(t):.2f}x | {ahead} of {len(s)} |")
EOF
