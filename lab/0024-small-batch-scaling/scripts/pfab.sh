#!/bin/bash
# usage: pfab.sh TOTAL ROUNDS DIV [extra]; A = default, B = SENJU_PF_DIV=DIV
total=$1; rounds=$2; div=$3; shift 3
bin=$(cd "$(dirname "$0")/../../.." && pwd)/target/bench/release/senju
cd /tmp
for r in $(seq $rounds); do
  for v in A B; do
    for t in 1 2; do
      if [ $v = B ]; then export SENJU_PF_DIV=$div; else unset SENJU_PF_DIV; fi
      q=$( { /usr/bin/time -f "TIME %e %U %S" $bin perf sequence --batch 1000 --set_only --iter $((total/t)) --threads $t "$@" ; } 2>&1 | grep -o "qps=[0-9]*" | cut -d= -f2)
      echo "$v $t $q"
    done
  done
done
