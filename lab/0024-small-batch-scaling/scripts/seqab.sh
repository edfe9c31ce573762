#!/bin/bash
# usage: seqab.sh TOTAL ROUNDS [extra args]; A = default, B = SENJU_PREFAULT_IDLE=1
total=$1; rounds=$2; shift 2
bin=$(cd "$(dirname "$0")/../../.." && pwd)/target/bench/release/senju
cd /tmp
for r in $(seq $rounds); do
  for v in A B; do
    for t in 1 2; do
      if [ $v = B ]; then export SENJU_PREFAULT_IDLE=1; else unset SENJU_PREFAULT_IDLE; fi
      q=$($bin perf sequence --batch 1000 --set_only --iter $((total/t)) --threads $t "$@" 2>&1 | grep -o 'qps=[0-9]*' | head -1 | cut -d= -f2)
      echo "$v $t $q"
    done
  done
done
