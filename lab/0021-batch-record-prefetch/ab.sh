#!/usr/bin/env bash
# A/B of two `senju` builds on batched `perf sequence` phases (lab 0021): ROUNDS rounds,
# builds alternating inside each round, threads 1 and 2, batches of 1000, 10M records.
#   lab/0021-batch-record-prefetch/ab.sh OLD_SENJU NEW_SENJU [ROUNDS]
# Phases: fresh sets (`--set_only` on an empty file), and on copies of one 10M-record file
# (made once by OLD): gets, overwrites and removals, in key order and with --random_key.
# Prints one line per run: build phase threads qps; then medians per cell.
set -euo pipefail
old=$1 new=$2 rounds=${3:-5}
dir=${DIR:-/tmp/senju-lab-0021}
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
echo "# $(date -u +%FT%TZ) nproc=$(nproc) $(grep -m1 'cpu family' /proc/cpuinfo | tr -s '\t ' ' ') load=$(cut -d' ' -f1 /proc/loadavg) rounds=$rounds"
"$old" perf sequence --path "$dir/base.sj" --iter 10000000 --threads 1 --set_only >/dev/null
qps() { sed -n 's/^\(Setting\|Getting\|Removing\) done:.*qps=\([0-9]*\).*/\2/p'; }
for r in $(seq "$rounds"); do
  for build in old new; do
    bin=$old; [ "$build" = new ] && bin=$new
    for t in 1 2; do
      iter=$((10000000 / t))
      rm -f "$dir/f.sj"
      echo "$build fresh-set $t $("$bin" perf sequence --path "$dir/f.sj" --iter $iter --threads $t --set_only --batch 1000 | qps)"
      rm -f "$dir/f.sj"
      for rk in "" --random_key; do
        name=${rk:+random-}
        echo "$build ${name}get $t $("$bin" perf sequence --path "$dir/base.sj" --iter $iter --threads $t --get_only --batch 1000 $rk | qps)"
        for ph in set remove; do
          cp "$dir/base.sj" "$dir/c.sj"
          echo "$build ${name}${ph} $t $("$bin" perf sequence --path "$dir/c.sj" --iter $iter --threads $t --${ph}_only --batch 1000 $rk | qps)"
          rm -f "$dir/c.sj"
        done
      done
    done
  done
done | tee "$dir/runs.txt"
echo
echo "| phase | T | old median | new median | new/old |"
echo "|---|---|---|---|---|"
python3 - "$dir/runs.txt" <<'PY'
import sys, statistics as st
cells = {}
for line in open(sys.argv[1]):
    b, ph, t, q = line.split()
    cells.setdefault((ph, int(t)), {}).setdefault(b, []).append(int(q))
for (ph, t), v in sorted(cells.items()):
    o, n = st.median(v["old"]), st.median(v["new"])
    print(f"| {ph} | {t} | {o/1e6:.2f}M ({min(v['old'])/1e6:.2f}-{max(v['old'])/1e6:.2f}) | {n/1e6:.2f}M ({min(v['new'])/1e6:.2f}-{max(v['new'])/1e6:.2f}) | {n/o:.2f}x |")
PY
