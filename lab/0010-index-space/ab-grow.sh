#!/bin/bash
# alternating rounds: grow target 2/3 vs 4/5, perf sequence 10M, 1 thread
S=${SENJU:-target/release/senju}
for r in $(seq 1 ${1:-3}); do
  for g in 2/3 4/5; do
    rm -f ${DIR:-/tmp}/s.sj
    out=$(SENJU_EXP_GROW=$g $S perf sequence --path ${DIR:-/tmp}/s.sj --iter 10000000 --threads ${2:-1} 2>&1)
    sz=$(echo "$out" | grep -m1 -o 'file_size=[0-9]*')
    echo "round=$r grow=$g $(echo "$out" | grep -E '^(Setting|Getting|Removing) done' | sed -E 's/.*(Setting|Getting|Removing) done: elapsed_time=([0-9.]+).*qps=([0-9]+).*/\1=\3/' | tr '\n' ' ') $sz"
  done
done
rm -f ${DIR:-/tmp}/s.sj
