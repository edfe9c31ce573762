#!/bin/bash
# A = abi3 wheel of HEAD (target/pybench), B = this change (/tmp/noabi/venv); alternating rounds
R=${1:-3}; shift
for r in $(seq $R); do
  for v in A B; do
    if [ $v = A ]; then PY=/work/main/target/pybench/bin/python; else PY=/tmp/noabi/venv/bin/python; fi
    $PY /work/main/bindings/python/bench/bench_threads.py --rounds 1 --peers senju-auto "$@" 2>&1 |
      awk -v r=$r -v v=$v '/^## /{c=$2" "$3} /^senju-auto/{printf "%s %s %s", r, v, c; for(i=2;i<=NF;i+=3) printf " %s", $i; print ""}'
  done
done
