#!/bin/bash
# usage: envab.sh TOTAL ROUNDS VAR VALUE [perf args]: `senju perf sequence --batch 1000
# --set_only` at 1 and 2 threads, TOTAL records in all, alternating A (VAR unset) and
# B (VAR=VALUE) each round; prints "A|B threads qps" lines for med.py.
total=$1; rounds=$2; var=$3; value=$4; shift 4
bin=$(cd "$(dirname "$0")/../../.." && pwd)/target/bench/release/senju
cd /tmp
for r in $(seq "$rounds"); do
  for v in A B; do
    for t in 1 2; do
      if [ $v = B ]; then export "$var=$value"; else unset "$var"; fi
      q=$("$bin" perf sequence --batch 1000 --set_only --iter $((total / t)) --threads $t "$@" 2>&1 |
        grep -o 'qps=[0-9]*' | head -1 | cut -d= -f2)
      echo "$v $t $q"
    done
  done
done
